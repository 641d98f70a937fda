"""Mailgun webhook signatures: checking them, and making them (tests).

As Mailgun documents it ("Securing webhooks"): each POST carries ``signature`` =
``{"timestamp", "token", "signature"}``, where ``signature`` is the hex HMAC-SHA256 of
``timestamp + token`` keyed with the account's HTTP webhook signing key. The body itself is
not signed, so a captured signature must never be accepted twice: the caller keeps the
tokens it has seen (``tidings.store.webhook_tokens``), and a timestamp more than five
minutes off is refused here, which bounds how long a token must be kept.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Mapping
from typing import Any

TOLERANCE_SECONDS = 300.0
# Unix seconds have 10 digits until the year 2286; Mailgun's tokens are 50 characters.
MAX_DIGITS = 12
MAX_TOKEN = 200


def compute(signing_key: str, timestamp: str, token: str) -> str:
    digest = hmac.new(signing_key.encode(), (timestamp + token).encode(), hashlib.sha256)
    return digest.hexdigest()


def refusal(
    signing_key: str, signed: Any, now: float, tolerance: float = TOLERANCE_SECONDS
) -> str | None:
    """Why ``signed`` (the body's ``signature`` object) does not hold, or None when it does."""
    if not isinstance(signed, Mapping):
        return "no signature object"
    timestamp, token, signature = (signed.get(k) for k in ("timestamp", "token", "signature"))
    if isinstance(timestamp, int) and not isinstance(timestamp, bool):
        timestamp = str(timestamp)
    if not all(isinstance(v, str) for v in (timestamp, token, signature)):
        return "timestamp, token and signature must be strings"
    assert isinstance(timestamp, str) and isinstance(token, str) and isinstance(signature, str)
    # Unauthenticated input: int() of a 5,000-digit string raises (and is slow).
    if not timestamp.isascii() or not timestamp.isdigit() or len(timestamp) > MAX_DIGITS:
        return "bad timestamp"
    if not token or len(token) > MAX_TOKEN:
        return "bad token"
    expected = compute(signing_key, timestamp, token)
    if not hmac.compare_digest(expected.encode(), signature.lower().encode("utf-8", "replace")):
        return "bad signature"
    if abs(now - int(timestamp)) > tolerance:
        return "stale timestamp"
    return None


def sign(signing_key: str, timestamp: int) -> dict[str, str]:
    """A fresh ``signature`` object for ``timestamp``, as Mailgun makes it."""
    stamp, token = str(timestamp), secrets.token_hex(25)
    return {"timestamp": stamp, "token": token, "signature": compute(signing_key, stamp, token)}
