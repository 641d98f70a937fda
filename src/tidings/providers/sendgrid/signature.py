"""SendGrid Event Webhook signatures: verifying them, and making them (simulator, tests).

SendGrid signs ``timestamp + raw body`` with ECDSA P-256 / SHA-256 and sends the DER
signature in base64 (``X-Twilio-Email-Event-Webhook-Signature``) next to the timestamp
(``X-Twilio-Email-Event-Webhook-Timestamp``). The public key is shown in base64 DER
SubjectPublicKeyInfo form. A timestamp more than five minutes off is refused (replays).
ECDSA verification compares no secret, so there is no timing-sensitive comparison here.
"""

from __future__ import annotations

import base64
import binascii
import time
from collections.abc import Callable, Mapping

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

SIGNATURE_HEADER = "X-Twilio-Email-Event-Webhook-Signature"
TIMESTAMP_HEADER = "X-Twilio-Email-Event-Webhook-Timestamp"
TOLERANCE_SECONDS = 300.0


def load_public_key(public_key: str) -> ec.EllipticCurvePublicKey:
    """The key from its base64 DER SubjectPublicKeyInfo (as SendGrid's settings show it)."""
    key = serialization.load_der_public_key(base64.b64decode(public_key, validate=True))
    if not isinstance(key, ec.EllipticCurvePublicKey) or key.curve.name != "secp256r1":
        raise ValueError("the SendGrid webhook key must be an ECDSA P-256 public key")
    return key


# Unix seconds have 10 digits until the year 2286.
MAX_DIGITS = 12


class EventWebhookVerifier:
    """Checks signed Event Webhook requests against the account's verification key."""

    def __init__(
        self,
        public_key: str,
        *,
        tolerance: float = TOLERANCE_SECONDS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._key = load_public_key(public_key)
        self._tolerance = tolerance
        self._clock = clock

    def verify(self, body: bytes, signature: str, timestamp: str) -> bool:
        """True when the signature is valid and the timestamp within the window."""
        # Unauthenticated input: int() of a 5,000-digit string raises (and is slow).
        if not timestamp.isascii() or not timestamp.isdigit() or len(timestamp) > MAX_DIGITS:
            return False
        if abs(self._clock() - int(timestamp)) > self._tolerance:
            return False
        return self.signature_valid(body, signature, timestamp)

    def verify_headers(self, body: bytes, headers: Mapping[str, str]) -> bool:
        """``verify`` with the two headers taken from a (case-insensitive) mapping."""
        signature = _header(headers, SIGNATURE_HEADER)
        timestamp = _header(headers, TIMESTAMP_HEADER)
        if signature is None or timestamp is None:
            return False
        return self.verify(body, signature, timestamp)

    def signature_valid(self, body: bytes, signature: str, timestamp: str) -> bool:
        """The signature alone, without the replay window (the published test vector)."""
        try:
            der = base64.b64decode(signature, validate=True)
            self._key.verify(der, timestamp.encode() + body, ec.ECDSA(hashes.SHA256()))
        except (InvalidSignature, binascii.Error, ValueError):
            return False
        return True


class EventWebhookSigner:
    """Signs bodies as SendGrid does; the simulator uses it to send events."""

    def __init__(
        self,
        private_key: ec.EllipticCurvePrivateKey | None = None,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._key = private_key or ec.generate_private_key(ec.SECP256R1())
        self._clock = clock

    @classmethod
    def from_pem(cls, pem: bytes) -> EventWebhookSigner:
        key = serialization.load_pem_private_key(pem, password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise ValueError("expected an ECDSA private key")
        return cls(key)

    def private_key_pem(self) -> bytes:
        return self._key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )

    @property
    def public_key(self) -> str:
        """The verification key in SendGrid's form: base64 DER SubjectPublicKeyInfo."""
        der = self._key.public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        return base64.b64encode(der).decode()

    def sign(self, body: bytes, timestamp: int | None = None) -> dict[str, str]:
        """The two headers for ``body`` (signed now unless ``timestamp`` is given)."""
        stamp = str(int(self._clock()) if timestamp is None else timestamp)
        der = self._key.sign(stamp.encode() + body, ec.ECDSA(hashes.SHA256()))
        return {SIGNATURE_HEADER: base64.b64encode(der).decode(), TIMESTAMP_HEADER: stamp}


def _header(headers: Mapping[str, str], name: str) -> str | None:
    value = headers.get(name)
    if value is not None:
        return value
    lowered = name.lower()
    return next((v for k, v in headers.items() if k.lower() == lowered), None)
