"""How a SparkPost webhook request proves it is SparkPost's: HTTP Basic credentials (the
webhook's ``auth_type: basic``) or its ``auth_token``, sent as
``X-MessageSystems-Webhook-Token``; both compared in constant time. SparkPost does not sign
the body."""

from __future__ import annotations

import base64
import binascii
import hmac
from collections.abc import Mapping

from tidings.providers.sparkpost.account import SparkPostAccount

TOKEN_HEADER = "x-messagesystems-webhook-token"
MAX_HEADER = 1024


def _basic(header: str | None) -> tuple[str, str] | None:
    if not header or len(header) > MAX_HEADER:
        return None
    scheme, _, encoded = header.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    user, colon, password = decoded.partition(":")
    return (user, password) if colon else None


def _same(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode(), expected.encode())


def authentic(headers: Mapping[str, str], account: SparkPostAccount) -> bool:
    """True when the request carries the account's credentials (either configured way)."""
    ok = False
    if account.webhook_token is not None:
        token = headers.get(TOKEN_HEADER) or ""
        ok = _same(token[:MAX_HEADER], account.webhook_token.get_secret_value())
    if account.webhook_username is not None and account.webhook_password is not None:
        given = _basic(headers.get("authorization")) or ("", "")
        user_ok = _same(given[0], account.webhook_username)
        password_ok = _same(given[1], account.webhook_password.get_secret_value())
        ok = ok or (user_ok and password_ok)
    return ok
