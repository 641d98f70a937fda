"""Google OAuth2 for a service account: a signed JWT exchanged for an access token.

The flow of google-auth's ``service_account.Credentials`` (RS256 assertion posted to the
account's ``token_uri``), with the token cached and refreshed before it expires.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey

from tidings.providers._push import (
    CONFIG_RETRY_AFTER,
    json_body,
    transport_failure,
)
from tidings.providers._retry_after import parse_retry_after
from tidings.providers.base import TransientError

GRANT_TYPE = "urn:ietf:params:oauth:grant-type:jwt-bearer"
FCM_SCOPE = "https://www.googleapis.com/auth/firebase.messaging"
# Refresh this long before the token expires (at most half its lifetime).
REFRESH_EARLY = 300.0


@dataclass(frozen=True)
class ServiceAccount:
    """The fields of a Google service-account JSON key that the flow needs."""

    client_email: str
    token_uri: str
    project_id: str | None
    private_key_id: str | None
    private_key: RSAPrivateKey = field(repr=False)

    @classmethod
    def from_json(cls, text: str) -> ServiceAccount:
        info: dict[str, Any] = json.loads(text)
        missing = [k for k in ("client_email", "private_key", "token_uri") if not info.get(k)]
        if missing:
            raise ValueError(f"service account JSON lacks {', '.join(missing)}")
        key = serialization.load_pem_private_key(info["private_key"].encode(), password=None)
        if not isinstance(key, RSAPrivateKey):
            raise ValueError("service account private_key is not an RSA key")
        return cls(
            client_email=info["client_email"],
            token_uri=info["token_uri"],
            project_id=info.get("project_id"),
            private_key_id=info.get("private_key_id"),
            private_key=key,
        )

    @classmethod
    def from_file(cls, path: Path) -> ServiceAccount:
        return cls.from_json(path.read_text())


@dataclass
class _Token:
    value: str
    refresh_at: float


class AccessTokens:
    """One cached access token; concurrent callers share a single refresh."""

    def __init__(
        self,
        account: ServiceAccount,
        client: httpx.AsyncClient,
        *,
        scope: str = FCM_SCOPE,
        token_uri: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.account = account
        self.token_uri = token_uri or account.token_uri
        self.scope = scope
        self._client = client
        self._clock = clock
        self._token: _Token | None = None
        self._lock = asyncio.Lock()

    async def get(self) -> str:
        token = self._token
        if token is not None and self._clock() < token.refresh_at:
            return token.value
        async with self._lock:
            token = self._token  # another caller may have refreshed while we waited
            if token is None or self._clock() >= token.refresh_at:
                token = self._token = await self._fetch()
            return token.value

    def invalidate(self, value: str) -> None:
        """Drop ``value`` (the server refused it), unless a newer token replaced it already."""
        if self._token is not None and self._token.value == value:
            self._token = None

    def assertion(self, now: float) -> str:
        claims = {
            "iss": self.account.client_email,
            "scope": self.scope,
            "aud": self.token_uri,
            "iat": int(now),
            "exp": int(now) + 3600,
        }
        headers = {"kid": self.account.private_key_id} if self.account.private_key_id else None
        return jwt.encode(claims, self.account.private_key, algorithm="RS256", headers=headers)

    async def _fetch(self) -> _Token:
        now = self._clock()
        form = {"grant_type": GRANT_TYPE, "assertion": self.assertion(now)}
        try:
            response = await self._client.post(self.token_uri, data=form)
        except httpx.HTTPError as error:
            raise transport_failure("google oauth", error) from error
        body = json_body(response)
        if response.status_code != 200 or not isinstance(body.get("access_token"), str):
            raise _token_failure(response, body, now)
        lifetime = float(body.get("expires_in", 3600))
        early = min(REFRESH_EARLY, lifetime / 2)
        return _Token(body["access_token"], now + lifetime - early)


def _token_failure(response: httpx.Response, body: dict[str, Any], now: float) -> TransientError:
    """Google down: retry soon. Refused grant (bad key, clock skew): the account's
    configuration; no device is at fault, so retry late rather than fail the message."""
    error = str(body.get("error", response.status_code))
    text = f"google oauth: {response.status_code} {error}: {body.get('error_description', '')}"
    if response.status_code == 429 or response.status_code >= 500:
        return TransientError(
            text,
            retry_after=parse_retry_after(response.headers.get("retry-after"), now),
            reason=error,
        )
    return TransientError(text, retry_after=CONFIG_RETRY_AFTER, reason=f"oauth:{error}")
