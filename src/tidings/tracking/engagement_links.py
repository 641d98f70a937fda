"""Signed open-pixel and click links (docs/tracking.md): ``/t/o/<token>`` names a delivery,
``/t/c/<token>`` a delivery and the URL that was in its message.

A click token carries its URL under the service's signature, so the click route answers
302 to that URL and to no other: a token cannot be altered to point elsewhere, and only
the dispatcher, rendering a message, makes them. Tokens expire after ``max_age_days``.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass

from itsdangerous import BadSignature, SignatureExpired, URLSafeTimedSerializer

_OPEN_SALT = "tidings.open"
_CLICK_SALT = "tidings.click"
# Longer than any token tidings makes (a URL is at most 2,048 characters in a message).
MAX_TOKEN_LENGTH = 8192


class InvalidToken(Exception):
    """Forged, altered or unreadable: answered 404, never a redirect."""


class ExpiredToken(InvalidToken):
    pass


@dataclass(frozen=True)
class Click:
    delivery_id: uuid.UUID
    url: str


class EngagementLinks:
    def __init__(self, secret: str, public_url: str, max_age_days: int) -> None:
        signing = {"digest_method": hashlib.sha256}
        self._opens = URLSafeTimedSerializer(secret, salt=_OPEN_SALT, signer_kwargs=signing)
        self._clicks = URLSafeTimedSerializer(secret, salt=_CLICK_SALT, signer_kwargs=signing)
        self.public_url = public_url.rstrip("/")
        self._max_age = max_age_days * 86400

    def open_url(self, delivery_id: uuid.UUID) -> str:
        return f"{self.public_url}/t/o/{self._opens.dumps(delivery_id.hex)}"

    def click_url(self, delivery_id: uuid.UUID, url: str) -> str:
        return f"{self.public_url}/t/c/{self._clicks.dumps([delivery_id.hex, url])}"

    def is_ours(self, url: str) -> bool:
        """A link to this service's own unsubscribe, preference or tracking routes: left as
        it is."""
        return url.startswith(tuple(f"{self.public_url}/{route}/" for route in "upt"))

    def read_open(self, token: str) -> uuid.UUID:
        payload = self._load(self._opens, token)
        if not isinstance(payload, str):
            raise InvalidToken("not an open token")
        return _delivery_id(payload)

    def read_click(self, token: str) -> Click:
        payload = self._load(self._clicks, token)
        if not (isinstance(payload, list) and len(payload) == 2):
            raise InvalidToken("not a click token")
        delivery, url = payload
        if not (isinstance(delivery, str) and isinstance(url, str)):
            raise InvalidToken("not a click token")
        # Only http(s) links are ever signed (html_links.tracked_links); checked again so
        # that not even a leaked secret makes this a redirect to javascript: or data:.
        if not url.lower().startswith(("http://", "https://")):
            raise InvalidToken("not a web link")
        return Click(_delivery_id(delivery), url)

    def _load(self, serializer: URLSafeTimedSerializer, token: str) -> object:
        if len(token) > MAX_TOKEN_LENGTH:
            raise InvalidToken("token too long")
        try:
            return serializer.loads(token, max_age=self._max_age)
        except SignatureExpired:
            raise ExpiredToken("this link has expired") from None
        except (BadSignature, ValueError, TypeError, UnicodeError):
            raise InvalidToken("this link is not valid") from None


def _delivery_id(text: str) -> uuid.UUID:
    try:
        return uuid.UUID(hex=text)
    except ValueError:
        raise InvalidToken("not a delivery") from None
