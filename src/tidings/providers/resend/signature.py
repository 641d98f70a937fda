"""Resend's webhook signatures: Svix, which is Standard Webhooks v1.

Headers ``svix-id`` (stable across Resend's retries of one event), ``svix-timestamp`` (Unix
seconds) and ``svix-signature``: space-separated ``v1,<base64 HMAC-SHA256>`` entries over
``{id}.{timestamp}.{raw body}``, keyed with the base64 bytes after ``whsec_`` of the
endpoint's signing secret. The ``webhook-*`` names of Standard Webhooks are read too. A
timestamp more than five minutes off is refused (replays of old captures).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Mapping

SECRET_PREFIX = "whsec_"
TOLERANCE_SECONDS = 5 * 60
# A header longer than this is no signature of ours (a few entries during a rotation).
MAX_HEADER = 2048


def decode_secret(secret: str) -> bytes:
    """The key bytes of ``whsec_<base64>``; ValueError when it is not one."""
    encoded = secret.removeprefix(SECRET_PREFIX)
    try:
        key = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
    except binascii.Error as error:
        raise ValueError("a Resend webhook secret is whsec_ followed by base64") from error
    if not key:
        raise ValueError("the webhook secret is empty")
    return key


def sign(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """One ``v1,<base64>`` entry of the signature header."""
    signed = f"{msg_id}.{timestamp}.".encode() + body
    digest = hmac.new(decode_secret(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode("ascii")


def _header(headers: Mapping[str, str], name: str) -> str | None:
    return headers.get(f"svix-{name}") or headers.get(f"webhook-{name}")


def refusal(secret: str, body: bytes, headers: Mapping[str, str], now: float) -> str | None:
    """Why the request is not signed with ``secret`` (``headers`` case-insensitive), or
    None when it is."""
    msg_id, stamp = _header(headers, "id"), _header(headers, "timestamp")
    signature = _header(headers, "signature")
    if not (msg_id and stamp and signature) or len(signature) > MAX_HEADER:
        return "missing svix-id, svix-timestamp or svix-signature"
    if not stamp.isdigit() or abs(now - int(stamp)) > TOLERANCE_SECONDS:
        return "timestamp missing or more than five minutes off"
    expected = sign(secret, msg_id, int(stamp), body).encode()
    given = [entry.encode() for entry in signature.split() if entry.startswith("v1,")]
    # Every entry compared (no early exit), each in constant time.
    if any([hmac.compare_digest(expected, entry) for entry in given]):
        return None
    return "no matching signature"


def message_id(headers: Mapping[str, str]) -> str | None:
    """The webhook message's id (the same on each retry of one event)."""
    return _header(headers, "id")
