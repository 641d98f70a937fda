"""The browser's and the push service's side of Web Push crypto, written from the RFCs on
their own (nothing from tidings' adapter or its libraries): decrypting an ``aes128gcm``
message (RFC 8188, keys of RFC 8291) and checking a VAPID ``Authorization`` (RFC 8292).
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

import jwt
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

HEADER_BYTES = 21  # salt (16), record size (4), key id length (1)
TAG_BYTES = 16
MAX_VAPID_LIFETIME = 24 * 3600  # RFC 8292 §2: exp no more than 24 hours ahead


class Refused(Exception):
    """A request the push service refuses, with the status it answers."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def b64url_decode(text: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise ValueError("not base64url") from None


def b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def raw_public(key: ec.EllipticCurvePrivateKey | ec.EllipticCurvePublicKey) -> bytes:
    public = key.public_key() if isinstance(key, ec.EllipticCurvePrivateKey) else key
    return public.public_bytes(
        serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
    )


def _hkdf(salt: bytes, secret: bytes, info: bytes, length: int) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=length, salt=salt, info=info).derive(secret)


def decrypt(body: bytes, private_key: ec.EllipticCurvePrivateKey, auth: bytes) -> bytes:
    """The plaintext of an ``aes128gcm`` body sent to the owner of ``private_key``; ValueError
    when it is not one (header, key, tag or padding)."""
    if len(body) < HEADER_BYTES:
        raise ValueError("shorter than the aes128gcm header")
    salt, record_size, id_length = body[:16], int.from_bytes(body[16:20], "big"), body[20]
    sender_key = body[HEADER_BYTES : HEADER_BYTES + id_length]
    records = body[HEADER_BYTES + id_length :]
    if id_length != 65 or record_size <= TAG_BYTES + 1 or not records:
        raise ValueError("the key id must be the sender's 65-byte P-256 key")
    sender = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), sender_key)
    shared = private_key.exchange(ec.ECDH(), sender)
    key_info = b"WebPush: info\x00" + raw_public(private_key) + sender_key
    ikm = _hkdf(auth, shared, key_info, 32)
    cek = _hkdf(salt, ikm, b"Content-Encoding: aes128gcm\x00", 16)
    nonce = int.from_bytes(_hkdf(salt, ikm, b"Content-Encoding: nonce\x00", 12), "big")
    chunks = [records[i : i + record_size] for i in range(0, len(records), record_size)]
    plain = bytearray()
    for sequence, chunk in enumerate(chunks):
        try:
            record = AESGCM(cek).decrypt((nonce ^ sequence).to_bytes(12, "big"), chunk, None)
        except InvalidTag:
            raise ValueError("the record does not decrypt (wrong keys or altered)") from None
        padded = record.rstrip(b"\x00")
        delimiter = 2 if sequence == len(chunks) - 1 else 1
        if not padded or padded[-1] != delimiter:
            raise ValueError("bad record padding delimiter")
        plain += padded[:-1]
    return bytes(plain)


@dataclass(frozen=True)
class Vapid:
    claims: dict[str, Any]
    key: bytes  # the application server's public key (uncompressed point)


def check_vapid(header: str | None, audience: str, now: float) -> Vapid:
    """The JWT and key of ``Authorization: vapid t=…, k=…``; ``Refused`` otherwise: 401 when
    it is missing, 403 when it is invalid (RFC 8292 §4.2)."""
    scheme, _, rest = (header or "").partition(" ")
    if scheme.lower() != "vapid":
        raise Refused(401, "missing vapid authorization")
    params = dict(part.strip().partition("=")[::2] for part in rest.split(","))
    token, key_text = params.get("t"), params.get("k")
    if not token or not key_text:
        raise Refused(401, "vapid authorization needs t= and k=")
    try:
        key = b64url_decode(key_text)
        public = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), key)
        claims = jwt.decode(
            token,
            public,
            algorithms=["ES256"],
            audience=audience,
            options={"require": ["aud", "exp", "sub"]},
        )
    except (ValueError, jwt.PyJWTError) as error:
        raise Refused(403, f"invalid vapid JWT: {error}") from None
    if claims["exp"] > now + MAX_VAPID_LIFETIME:
        raise Refused(403, "vapid JWT expires more than 24 hours ahead")
    if not str(claims["sub"]).startswith(("mailto:", "https:")):
        raise Refused(403, "vapid sub must be a mailto: or https: URL")
    return Vapid(claims, key)
