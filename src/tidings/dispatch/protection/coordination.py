"""What a dispatcher shares with the rest of the fleet, built from ``TIDINGS_REDIS_URL``:
a Redis client and its health, the shared rate limiter, dedup keys, in-flight slots and
open breakers (dispatch/protection/redis_limits.py and redis_guards.py). Without a URL
every part is this process's own, and the rate limits take this process's share of each rate."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError

from tidings.dispatch.protection.breaker import CircuitBreaker
from tidings.dispatch.protection.ratelimit import RateLimitSettings
from tidings.dispatch.protection.redis_guards import (
    BreakerSync,
    LocalDedup,
    RedisDedup,
    RedisSlots,
)
from tidings.dispatch.protection.redis_health import RedisHealth
from tidings.dispatch.protection.redis_limits import RedisRateLimiter
from tidings.providers.chains import ProviderSet

# Seconds a Redis call may take before the dispatcher treats Redis as down.
REDIS_TIMEOUT = 0.5


@dataclass
class Coordination:
    client: aioredis.Redis | None = None
    health: RedisHealth | None = None
    limiter: RedisRateLimiter | None = None
    dedup: LocalDedup | RedisDedup = field(default_factory=LocalDedup)
    slots: RedisSlots | None = None
    breakers: BreakerSync | None = None
    share: float = 1.0  # of each rate, while nothing shares the limits

    @classmethod
    def connect(
        cls,
        url: str | None,
        providers: ProviderSet,
        rate_limits: RateLimitSettings,
        lease_seconds: float,
        send_timeout: float,
    ) -> Coordination:
        if not url:
            return cls()
        client = aioredis.Redis.from_url(
            url,
            socket_timeout=REDIS_TIMEOUT,
            socket_connect_timeout=REDIS_TIMEOUT,
            # A pooled connection that a Redis restart closed fails once: try a new one.
            retry=Retry(NoBackoff(), 1),
            retry_on_error=[RedisConnectionError],
        )
        health = RedisHealth()
        accounts = providers.accounts
        rates = {n: a.rate_per_second for n, a in accounts.items() if a.rate_per_second}
        limiter = RedisRateLimiter(
            client, health, rates, rate_limits.shares, rate_limits.burst_seconds
        )
        limits = {name: account.max_in_flight for name, account in accounts.items()}
        return cls(
            client=client,
            health=health,
            limiter=limiter,
            # A stalled sender's key outlives its database lease: the next attempt waits.
            dedup=RedisDedup(client, health, 2 * lease_seconds),
            slots=RedisSlots(client, health, limits, send_timeout + 5),
        )

    def follow(self, breaker: CircuitBreaker) -> None:
        """Share this dispatcher's breaker's openings (and follow the others')."""
        if self.client is not None and self.health is not None:
            self.breakers = BreakerSync(self.client, self.health, breaker)

    @property
    def mode(self) -> str:
        if self.health is None:
            return "local"
        return "redis" if self.health.up else "local-fallback"

    def snapshot(self) -> dict[str, Any]:
        """For GET /v1/providers: how this dispatcher's limits are shared right now."""
        found: dict[str, Any] = {"mode": self.mode, "localShare": round(self.share, 4)}
        if self.health is not None:
            found["redis"] = self.health.snapshot()
        return found

    async def close(self) -> None:
        if self.client is not None:
            with contextlib.suppress(Exception):
                await self.client.aclose()
