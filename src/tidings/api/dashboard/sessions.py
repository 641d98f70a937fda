"""The dashboard's sign-in (docs/operations.md, Dashboard).

A browser signs in with an API key once; its session is a signed cookie (HttpOnly, Secure,
SameSite=Strict, Path=/dashboard, eight hours) that holds a random session id and the key's
id, never the key, so every page checks again that the key exists and is not revoked. Every
form carries a token derived from the session id with the service's secret: a page of
another site can neither read it nor make it, and a POST without it is refused.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import uuid
from dataclasses import dataclass
from urllib.parse import urlsplit

from fastapi import Request, Response
from itsdangerous import BadSignature, URLSafeTimedSerializer

COOKIE = "tidings_dashboard"
PATH = "/dashboard"
SESSION_SECONDS = 8 * 3600
_SALT = "tidings.dashboard.session"
_CSRF_SALT = b"tidings.dashboard.csrf"


@dataclass(frozen=True)
class Session:
    id: str  # random; what the forms' token is derived from
    key_id: uuid.UUID | None  # None: not signed in (or the service has no keys)


class Sessions:
    def __init__(self, secret: str) -> None:
        self._serializer = URLSafeTimedSerializer(secret, salt=_SALT)
        self._csrf_key = hmac.new(secret.encode(), _CSRF_SALT, hashlib.sha256).digest()

    @staticmethod
    def new(key_id: uuid.UUID | None = None) -> Session:
        return Session(secrets.token_urlsafe(18), key_id)

    def read(self, request: Request) -> Session | None:
        """The request's session, if its cookie is ours and younger than eight hours."""
        value = request.cookies.get(COOKIE)
        if not value:
            return None
        try:
            session_id, key_id = self._serializer.loads(value, max_age=SESSION_SECONDS)
            return Session(str(session_id), uuid.UUID(key_id) if key_id else None)
        except (BadSignature, ValueError, TypeError):
            return None

    def set_cookie(self, response: Response, session: Session) -> None:
        key_id = str(session.key_id) if session.key_id else None
        response.set_cookie(
            COOKIE,
            self._serializer.dumps([session.id, key_id]),
            max_age=SESSION_SECONDS,
            path=PATH,
            secure=True,
            httponly=True,
            samesite="strict",
        )

    @staticmethod
    def clear_cookie(response: Response) -> None:
        response.delete_cookie(COOKIE, path=PATH, secure=True, httponly=True, samesite="strict")

    def csrf_token(self, session: Session) -> str:
        return hmac.new(self._csrf_key, session.id.encode(), hashlib.sha256).hexdigest()

    def csrf_ok(self, session: Session | None, token: str | None) -> bool:
        if session is None or not token:
            return False
        return hmac.compare_digest(self.csrf_token(session), token)


def same_origin(request: Request) -> bool:
    """False when the browser says the form was posted from another site (Origin, else
    Referer); True when it says nothing (the token still decides). The site is the Host,
    or a proxy's X-Forwarded-Host: a page of another site cannot set that header."""
    claimed = request.headers.get("origin") or request.headers.get("referer")
    if claimed is None:
        return True
    hosts = {request.headers.get("host"), request.headers.get("x-forwarded-host")} - {None}
    return claimed != "null" and urlsplit(claimed).netloc in hosts
