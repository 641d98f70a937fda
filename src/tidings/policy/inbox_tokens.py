"""User tokens for browsers (docs/inbox.md, User tokens): a token lets its holder read and
mark one user's inbox feed, for a bounded time, and nothing else.

A token is ``tdu_`` and a JWT (HS256) with the claims ``sub`` (the user id), ``aud``
(``tidings-inbox``), ``iat`` and ``exp``, signed with a key derived from the service's
secret (HMAC-SHA256 of ``tidings.inbox-token`` under the secret), so that it is no use as
any other of tidings' signatures, and a backend holding that key can mint tokens itself
without a call (``mint`` here is the whole recipe).
"""

from __future__ import annotations

import hashlib
import hmac
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

import jwt

PREFIX = "tdu_"
AUDIENCE = "tidings-inbox"
_PURPOSE = b"tidings.inbox-token"
# A token longer than this is not one of ours: refused before any signature check.
MAX_TOKEN_CHARS = 2048
# How far a minting backend's clock may run ahead of ours.
CLOCK_SKEW_SECONDS = 60


class InvalidToken(Exception):
    """Forged, altered, expired, or not a user token."""


def signing_key(secret: str) -> bytes:
    """The key user tokens are signed with: a backend minting tokens itself uses it."""
    return hmac.new(secret.encode(), _PURPOSE, hashlib.sha256).digest()


@dataclass(frozen=True)
class Issued:
    token: str
    user_id: str
    expires_at: datetime


class InboxTokens:
    def __init__(self, secret: str, lifetime_seconds: int) -> None:
        self._key = signing_key(secret)
        self.lifetime = timedelta(seconds=lifetime_seconds)

    def mint(self, user_id: str, now: datetime) -> Issued:
        expires = now + self.lifetime
        claims = {"sub": user_id, "aud": AUDIENCE, "iat": now, "exp": expires}
        token = PREFIX + jwt.encode(claims, self._key, algorithm="HS256")
        return Issued(token, user_id, expires.replace(microsecond=0))

    def user_of(self, token: str) -> str:
        """The user a genuine, unexpired token names; else ``InvalidToken``."""
        if not token.startswith(PREFIX) or len(token) > MAX_TOKEN_CHARS:
            raise InvalidToken("not a user token")
        try:
            claims = jwt.decode(
                token.removeprefix(PREFIX),
                self._key,
                algorithms=["HS256"],
                audience=AUDIENCE,
                options={"require": ["sub", "exp", "aud"]},
            )
        except jwt.ExpiredSignatureError:
            raise InvalidToken("the user token has expired") from None
        except jwt.PyJWTError:
            raise InvalidToken("the user token is not valid") from None
        user = claims.get("sub")
        if not isinstance(user, str) or not user:
            raise InvalidToken("the user token is not valid")
        # A token minted elsewhere (docs/inbox.md) is held to the same bounded lifetime.
        if claims["exp"] > time.time() + self.lifetime.total_seconds() + CLOCK_SKEW_SECONDS:
            raise InvalidToken("the user token lives longer than inbox.token_seconds")
        return user


def is_user_token(token: str | None) -> bool:
    return token is not None and token.startswith(PREFIX)
