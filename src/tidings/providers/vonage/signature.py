"""Vonage's signed webhooks: ``Authorization: Bearer <JWT>``, HS256 with the account's
signature secret, whose ``payload_hash`` claim is the SHA-256 (hex) of the raw body.

Verified here with the standard library rather than a JWT library: only HS256 is taken (a
token naming any other algorithm, ``none`` included, is refused), and a short secret, which
Vonage allows, is no reason to warn at every request. A token whose ``iat`` is more than
``MAX_SKEW_SECONDS`` away from now is refused as stale (or forged ahead), so a captured
request cannot be replayed later.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from typing import Any

MAX_SKEW_SECONDS = 300


def verify(secret: str, authorization: str | None, body: bytes, now: float) -> bool:
    """True when ``authorization`` is a fresh HS256 JWT of ``secret`` over this ``body``."""
    claims = _claims(secret, authorization)
    if claims is None:
        return False
    issued = claims.get("iat")
    if not isinstance(issued, int | float) or isinstance(issued, bool):
        return False
    if abs(now - issued) > MAX_SKEW_SECONDS:
        return False
    expected = hashlib.sha256(body).hexdigest()
    given = claims.get("payload_hash")
    return isinstance(given, str) and hmac.compare_digest(given.lower(), expected)


def _claims(secret: str, authorization: str | None) -> dict[str, Any] | None:
    """The token's claims when its HS256 signature is the secret's; else None."""
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or token.count(".") != 2:
        return None
    head, payload, signature = token.strip().split(".")
    header = _json(head)
    if header is None or header.get("alg") != "HS256":
        return None
    signed = f"{head}.{payload}".encode("ascii", "replace")
    digest = hmac.new(secret.encode(), signed, hashlib.sha256).digest()
    given = _b64url(signature)
    if given is None or not hmac.compare_digest(digest, given):
        return None
    return _json(payload)


def _json(part: str) -> dict[str, Any] | None:
    raw = _b64url(part)
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _b64url(part: str) -> bytes | None:
    try:
        return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
    except (binascii.Error, ValueError):
        return None
