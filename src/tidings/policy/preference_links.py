"""Preference center links (docs/inbox.md, The preference center): ``/p/<token>`` opens one
user's preferences, and each form that page shows carries a nonce bound to that link.

A link's token is the user id signed with the service's secret (its own salt, so that no
other of tidings' signatures reads as one), with the time it was made: it expires after
``max_age_days``. A form's nonce is a digest of the link's token, signed with the time the
page was shown (another salt): a POST without it, with one of another link's page, or with
one older than ``FORM_SECONDS`` is refused. It needs no state and no cookie, so any API
process checks what any other showed.
"""

from __future__ import annotations

import hashlib
import hmac

from itsdangerous import BadSignature, SignatureExpired, URLSafeTimedSerializer

_SALT = "tidings.preferences"
_FORM_SALT = "tidings.preferences.form"
# Longer than any token tidings makes (a user id is at most 255 characters).
MAX_TOKEN_CHARS = 1024
# How long a shown form may be saved: a user reading the page for an hour still saves it.
FORM_SECONDS = 4 * 3600


class InvalidLink(Exception):
    """Forged, altered or unreadable."""


class ExpiredLink(InvalidLink):
    pass


class PreferenceLinks:
    def __init__(self, secret: str, public_url: str, max_age_days: int) -> None:
        signing = {"digest_method": hashlib.sha256}
        self._links = URLSafeTimedSerializer(secret, salt=_SALT, signer_kwargs=signing)
        self._forms = URLSafeTimedSerializer(secret, salt=_FORM_SALT, signer_kwargs=signing)
        self.public_url = public_url.rstrip("/")
        self._max_age = max_age_days * 86400

    def token(self, user_id: str) -> str:
        return self._links.dumps(user_id)

    def url(self, user_id: str) -> str:
        return f"{self.public_url}/p/{self.token(user_id)}"

    def user_of(self, token: str) -> str:
        """The user a genuine, unexpired link names; else ``InvalidLink``/``ExpiredLink``."""
        if len(token) > MAX_TOKEN_CHARS:
            raise InvalidLink("this link is not valid")
        try:
            user = self._links.loads(token, max_age=self._max_age)
        except SignatureExpired:
            raise ExpiredLink("this link has expired") from None
        except BadSignature:
            raise InvalidLink("this link is not valid") from None
        if not isinstance(user, str) or not user:
            raise InvalidLink("this link is not valid")
        return user

    def form_nonce(self, token: str) -> str:
        """The nonce the page of ``token`` puts in its form."""
        return self._forms.dumps(_digest(token))

    def form_ok(self, token: str, nonce: str | None) -> bool:
        """Whether ``nonce`` came from a page of this very link, shown not long ago."""
        if not nonce or len(nonce) > MAX_TOKEN_CHARS:
            return False
        try:
            bound = self._forms.loads(nonce, max_age=FORM_SECONDS)
        except BadSignature:
            return False
        return isinstance(bound, str) and hmac.compare_digest(bound, _digest(token))


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()[:32]
