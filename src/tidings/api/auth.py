"""API keys and scopes (docs/security.md).

Every route declares what it needs: ``needs(Scope.SEND)`` (a key with that scope) or
``PUBLIC`` (routes that carry their own signature, such as provider webhooks and
unsubscribe links, and health checks). Until the first key is created the service is open
(every caller may do everything, in the configured namespace); from then on every request
to a scoped route needs ``Authorization: Bearer <key>``: 401 without a valid key, 403
without the scope.
"""

from __future__ import annotations

import functools
import hashlib
import math
import secrets
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Annotated

from fastapi import Depends, Request, Security, params
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from fastapi.security.utils import get_authorization_scheme_param

from tidings.clock import utcnow
from tidings.refusal import Refusal
from tidings.service import Service
from tidings.services import inbox
from tidings.services import keys as api_keys
from tidings.services.keys import Database, StoredKey
from tidings.singleflight import SingleFlight

KEY_PREFIX = "tdk_"
# What listings show of a key: enough to tell keys apart, far too little to guess one.
SHOWN_CHARS = 12


class Scope(StrEnum):
    SEND = "send"  # submit notifications
    READ = "read"  # read notifications and their deliveries
    CAMPAIGNS = "campaigns"
    TEMPLATES = "templates"
    USERS = "users"  # profiles, preferences, devices, topics
    ADMIN = "admin"  # types, suppressions, dead letters, providers, keys
    METRICS = "metrics"  # GET /metrics (every namespace's counts: for the operators' scraper)


ALL_SCOPES = frozenset(Scope)


def new_key() -> str:
    """A key of 256 random bits, shown once."""
    return KEY_PREFIX + secrets.token_urlsafe(32)


def key_hash(key: str) -> str:
    # A fast hash is enough: nobody guesses 256 random bits, slowly or quickly.
    return hashlib.sha256(key.encode()).hexdigest()


def issue_key(
    name: str, scopes: Iterable[str], namespace: str, accept_rate: float | None = None
) -> tuple[str, StoredKey]:
    """A new key, and what is stored of it."""
    key = new_key()
    stored = StoredKey(
        uuid.uuid4(),
        name,
        key_hash(key),
        key[:SHOWN_CHARS],
        namespace,
        tuple(scopes),
        accept_rate,
        utcnow(),
        None,
    )
    return key, stored


@dataclass(frozen=True)
class Caller:
    """Who is calling: a key, or anyone while the service has no keys."""

    namespace: str
    scopes: frozenset[Scope]
    key_id: uuid.UUID | None = None
    key_name: str | None = None
    accept_rate: float | None = None


@dataclass
class _Bucket:
    """Notifications a key may still submit; it may run into debt by one batch, so a
    batch larger than the rate still passes, then waits its turn."""

    rate: float
    tokens: float
    at: float = field(default_factory=time.monotonic)

    def take(self, count: int) -> float:
        """0 if ``count`` may go now (and takes them), else the seconds to wait."""
        now = time.monotonic()
        self.tokens = min(self.rate, self.tokens + (now - self.at) * self.rate)
        self.at = now
        if self.tokens <= 0:
            return -self.tokens / self.rate + 1 / self.rate
        self.tokens -= count
        return 0.0


class Keyring:
    """The API keys, read from the database at most every ``refresh_seconds`` (a revoked
    key stops working within that time); a key not seen yet is looked up at once."""

    def __init__(self, db: Database, namespace: str, refresh_seconds: float) -> None:
        self._db = db
        self._open = Caller(namespace, ALL_SCOPES)
        self._refresh_seconds = refresh_seconds
        self._by_hash: dict[str, StoredKey] = {}
        self._any = False
        self._loaded_at = -math.inf
        self._reload = SingleFlight(self._load)
        self._buckets: dict[uuid.UUID, _Bucket] = {}

    async def _load(self) -> None:
        keys = await api_keys.all_keys(self._db)
        self._by_hash = {key.key_hash: key for key in keys}
        self._any = bool(keys)
        self._loaded_at = time.monotonic()

    def forget(self) -> None:
        """Read the keys again on the next request (after this process changed them)."""
        self._loaded_at = -math.inf

    async def _fresh(self) -> None:
        if time.monotonic() - self._loaded_at >= self._refresh_seconds:
            await self._reload()

    async def caller(self, token: str | None) -> Caller:
        await self._fresh()
        if not self._any:
            return self._open
        if token is None:
            raise Refusal(
                "unauthorized",
                "this route needs an API key: Authorization: Bearer <key>",
                "Authorization",
                401,
                {"WWW-Authenticate": "Bearer"},
            )
        found = self._by_hash.get(key_hash(token))
        if found is None:
            found = await self._look_up(token)
        if found is None or found.revoked:
            raise Refusal(
                "unauthorized",
                "the API key is not valid (unknown or revoked)",
                "Authorization",
                401,
                {"WWW-Authenticate": 'Bearer error="invalid_token"'},
            )
        return _caller_of(found)

    async def caller_by_id(self, key_id: uuid.UUID | None) -> Caller | None:
        """The caller of the key with that id (the dashboard's session holds the id, not
        the key): None if it is unknown or revoked; anyone while the service has no keys."""
        await self._fresh()
        if not self._any:
            return self._open
        if key_id is None:
            return None
        found = self._by_id(key_id)
        if found is None:
            await self._reload()  # made by another process since the last read
            found = self._by_id(key_id)
        return None if found is None or found.revoked else _caller_of(found)

    def _by_id(self, key_id: uuid.UUID) -> StoredKey | None:
        return next((key for key in self._by_hash.values() if key.id == key_id), None)

    async def _look_up(self, token: str) -> StoredKey | None:
        # Only well-formed keys reach the database: garbage costs no query.
        if not token.startswith(KEY_PREFIX) or len(token) > 100:
            return None
        found = await api_keys.by_hash(self._db, key_hash(token))
        if found is not None:
            self._by_hash[found.key_hash] = found
        return found

    def admit(self, caller: Caller, count: int) -> None:
        """Refuse (429) a submission of ``count`` notifications over the key's rate."""
        if caller.accept_rate is None or caller.key_id is None:
            return
        bucket = self._buckets.get(caller.key_id)
        if bucket is None or bucket.rate != caller.accept_rate:
            bucket = self._buckets[caller.key_id] = _Bucket(caller.accept_rate, caller.accept_rate)
        wait = bucket.take(count)
        if wait > 0:
            raise Refusal(
                "rate_limited",
                f"API key {caller.key_name!r} may submit {caller.accept_rate:g} notifications "
                "per second; retry after the time in Retry-After",
                None,
                429,
                {"Retry-After": str(max(1, math.ceil(wait)))},
            )


@functools.lru_cache(maxsize=1024)
def _caller_of(found: StoredKey) -> Caller:
    """Built once per key row (rows are immutable: a revoke reads a new one)."""
    return Caller(
        found.namespace,
        frozenset(Scope(s) for s in found.scopes if s in Scope.__members__.values()),
        found.id,
        found.name,
        found.accept_rate,
    )


_bearer = HTTPBearer(
    scheme_name="apiKey",
    description="An API key made by `tidings keys create` (docs/security.md).",
    auto_error=False,
)
Credentials = Annotated[HTTPAuthorizationCredentials | None, Security(_bearer)]


def bearer_token(authorization: str | None) -> str | None:
    """The key in an ``Authorization: Bearer <key>`` header, as HTTPBearer reads it."""
    scheme, token = get_authorization_scheme_param(authorization)
    return token if scheme.lower() == "bearer" and token else None


def keyring_of(request: Request) -> Keyring:
    keyring: Keyring = request.app.state.keyring
    return keyring


class ScopeCheck:
    """The dependency of a route that needs ``scope``; it answers the Caller."""

    def __init__(self, scope: Scope) -> None:
        self.scope = scope

    async def __call__(self, request: Request, credentials: Credentials) -> Caller:
        token = credentials.credentials if credentials is not None else None
        caller = await keyring_of(request).caller(token)
        if self.scope not in caller.scopes:
            raise Refusal(
                "forbidden",
                f"API key {caller.key_name!r} lacks the scope {self.scope.value!r}",
                "Authorization",
                403,
            )
        request.state.caller = caller
        return caller


class UserOrScope(ScopeCheck):
    """A route of one user's inbox feed (docs/inbox.md): a key with ``scope``, or that
    user's own token (``tdu_...``), never another user's. ``query_token``: the token may also
    come as ``?token=`` (EventSource cannot send headers)."""

    def __init__(self, scope: Scope, query_token: bool = False) -> None:
        super().__init__(scope)
        self.query_token = query_token

    async def __call__(self, request: Request, credentials: Credentials) -> Caller:
        token = credentials.credentials if credentials is not None else None
        if token is None and self.query_token:
            token = request.query_params.get("token")
        if not inbox.is_user_token(token):
            return await super().__call__(request, credentials)
        assert token is not None
        service: Service = request.app.state.service
        try:
            user = inbox.token_user(service, token)
        except inbox.InvalidToken as error:
            raise Refusal(
                "unauthorized", str(error), "Authorization", 401, {"WWW-Authenticate": "Bearer"}
            ) from None
        if user != request.path_params.get("user_id"):
            raise Refusal("forbidden", "this user token is for another user", "Authorization", 403)
        caller = Caller(service.settings.namespace, frozenset(), key_name=f"user token of {user}")
        request.state.caller = caller
        return caller


def user_routes(scope: Scope, query_token: bool = False) -> list[params.Depends]:
    """``dependencies=user_routes(Scope.READ)``: a key with the scope, or the user's token."""
    return [Depends(UserOrScope(scope, query_token))]


def takes_user_tokens(dependencies: Sequence[params.Depends]) -> bool:
    """Whether a route accepts user tokens (the key check leaves them to the route)."""
    return any(isinstance(d.dependency, UserOrScope) for d in dependencies)


class _Public:
    """The dependency of a route that needs no key: it carries its own proof (a provider's
    signature, a signed link) or reveals nothing (health checks)."""

    def __call__(self) -> None:
        return None


PUBLIC = [Depends(_Public())]


def needs(scope: Scope) -> list[params.Depends]:
    """``dependencies=needs(Scope.SEND)`` on a route or router."""
    return [Depends(ScopeCheck(scope))]


def caller_of(request: Request) -> Caller:
    """The caller a route's scope check found."""
    caller: Caller = request.state.caller
    return caller


def route_scope(dependencies: Sequence[params.Depends]) -> str | None:
    """A route's declared scope, "public", or None when it declares neither."""
    for dependency in dependencies:
        if isinstance(dependency.dependency, ScopeCheck):
            return dependency.dependency.scope.value
        if isinstance(dependency.dependency, _Public):
            return "public"
    return None
