"""Standard Webhooks v1 signatures (used by the webhook channel and its simulated receiver).

Headers ``webhook-id`` (stable across retries), ``webhook-timestamp`` (Unix seconds) and
``webhook-signature``: space-separated ``v1,<base64 HMAC-SHA256>`` entries over
``{id}.{timestamp}.{raw body}``, keyed with the base64 bytes of a ``whsec_...`` secret.
Several entries may be present while a secret is rotated.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import time
from collections.abc import Mapping

SECRET_PREFIX = "whsec_"
TOLERANCE_SECONDS = 5 * 60


class WebhookVerificationError(Exception):
    """The request is not authentic (or too old, or too new)."""


def decode_secret(secret: str) -> bytes:
    """The key bytes of ``whsec_<base64>`` (the prefix is optional, padding may be missing)."""
    encoded = secret.removeprefix(SECRET_PREFIX)
    try:
        key = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
    except binascii.Error as error:
        raise ValueError("a webhook secret is whsec_ followed by base64") from error
    if not key:
        raise ValueError("the webhook secret is empty")
    return key


def sign(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """One ``v1,<base64>`` entry for the ``webhook-signature`` header."""
    signed = f"{msg_id}.{timestamp}.".encode() + body
    digest = hmac.new(decode_secret(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode("ascii")


def headers(
    secrets: str | list[str], msg_id: str, body: bytes, timestamp: int | None = None
) -> dict[str, str]:
    """The three headers of a signed delivery; several secrets (a rotation) sign it each."""
    ts = int(time.time()) if timestamp is None else timestamp
    keys = [secrets] if isinstance(secrets, str) else secrets
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(ts),
        "webhook-signature": " ".join(sign(key, msg_id, ts, body) for key in keys),
    }


def verify(
    secrets: str | list[str],
    body: bytes,
    request_headers: Mapping[str, str],
    *,
    now: float | None = None,
    tolerance: int = TOLERANCE_SECONDS,
) -> None:
    """Raise ``WebhookVerificationError`` unless one ``v1`` entry matches one secret."""
    lowered = {k.lower(): v for k, v in request_headers.items()}
    msg_id = lowered.get("webhook-id")
    stamp = lowered.get("webhook-timestamp")
    signature = lowered.get("webhook-signature")
    if not (msg_id and stamp and signature):
        raise WebhookVerificationError("missing webhook-id, webhook-timestamp or signature")
    timestamp = _check_timestamp(stamp, time.time() if now is None else now, tolerance)
    candidates = _v1_signatures(signature)
    for secret in [secrets] if isinstance(secrets, str) else secrets:
        expected = sign(secret, msg_id, timestamp, body).removeprefix("v1,").encode()
        # Compare against every entry (no early exit), each in constant time.
        if any([hmac.compare_digest(expected, c) for c in candidates]):
            return
    raise WebhookVerificationError("no matching signature")


def _check_timestamp(stamp: str, now: float, tolerance: int) -> int:
    try:
        timestamp = int(stamp)
    except ValueError as error:
        raise WebhookVerificationError("webhook-timestamp is not an integer") from error
    if abs(now - timestamp) > tolerance:
        raise WebhookVerificationError("webhook-timestamp outside the tolerance")
    return timestamp


def _v1_signatures(header: str) -> list[bytes]:
    entries = (entry.partition(",") for entry in header.split())
    return [value.encode() for version, comma, value in entries if version == "v1" and comma]
