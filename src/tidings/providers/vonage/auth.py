"""How the Vonage adapter authenticates: HTTP Basic with the API key and secret, or an
application JWT (RS256, signed with the application's private key).

Vonage's application JWT carries ``application_id``, ``iat``, ``jti`` and ``exp``. One is
minted per ``REUSE_SECONDS`` and reused until then: it stays valid for ``LIFETIME_SECONDS``,
so a request in flight never carries one about to expire.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Generator
from dataclasses import dataclass, field

import httpx
import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey

LIFETIME_SECONDS = 900
REUSE_SECONDS = 300


def load_rsa_key(pem: str) -> RSAPrivateKey:
    """The application's private key (PEM, as Vonage's dashboard downloads it)."""
    key = serialization.load_pem_private_key(pem.encode(), password=None)
    if not isinstance(key, RSAPrivateKey):
        raise ValueError("the Vonage application private key must be an RSA key")
    return key


@dataclass
class ApplicationJwt(httpx.Auth):
    """``Authorization: Bearer <application JWT>`` on every request."""

    application_id: str
    private_key: RSAPrivateKey = field(repr=False)
    clock: Callable[[], float] = time.time
    _token: str | None = field(default=None, repr=False)
    _minted: float = 0.0

    def token(self) -> str:
        now = self.clock()
        if self._token is None or now - self._minted >= REUSE_SECONDS:
            issued = int(now)
            claims = {
                "application_id": self.application_id,
                "iat": issued,
                "jti": str(uuid.uuid4()),
                "exp": issued + LIFETIME_SECONDS,
            }
            self._token = jwt.encode(claims, self.private_key, algorithm="RS256")
            self._minted = now
        return self._token

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = f"Bearer {self.token()}"
        yield request
