"""What else a fleet of dispatchers shares through Redis besides rate limits: dedup keys per
delivery, the ``max_in_flight`` cap per account, and open circuit breakers.

- **Dedup** (a second line behind the database claim): just before the provider call a
  dispatcher sets ``tidings:send:<delivery>`` to ``sending:<attempt>`` if it is not set
  (``SET NX``, expiring after ``sending_ttl``); after a success it becomes
  ``sent:<account>:<message id>`` for 7 days, after a failure it is deleted. A delivery
  found ``sent`` is not sent again (its outcome is written from the key: the answer of a
  send whose outcome a crash lost), one found ``sending`` by another attempt waits.
- **In flight**: a sorted set per account of holders, scored by when their lease ends; a slot
  is taken when fewer than ``max_in_flight`` unexpired holders remain. A killed process's
  slots are free again when their lease ends.
- **Breakers**: an account that one dispatcher's breaker opened is marked
  ``tidings:breaker:<account>`` for the open time; every dispatcher reads the marks every
  ``BREAKER_SYNC_SECONDS`` and opens its own breaker for the rest of that time.

Without Redis (or while it is down) each falls back to what one process does alone: no
dedup key (the database claim alone), the process's own semaphore, its own breaker.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from tidings.clock import utcnow
from tidings.dispatch.protection.breaker import BreakerStatus, CircuitBreaker
from tidings.dispatch.protection.redis_health import RedisHealth
from tidings.states import Status
from tidings.store.claims import ClaimedDelivery
from tidings.store.outcomes import Outcome

SENT_TTL_SECONDS = 7 * 24 * 3600
SLOT_POLL_SECONDS = 0.01
BREAKER_SYNC_SECONDS = 0.5


@dataclass(frozen=True)
class Go:
    """Nothing is known against sending now."""


@dataclass(frozen=True)
class SentBefore:
    """Another attempt sent it already (its outcome was lost): do not send again."""

    provider: str
    provider_msg_id: str | None


@dataclass(frozen=True)
class Busy:
    """Another attempt is sending it right now: wait ``seconds``."""

    seconds: float


Verdict = Go | SentBefore | Busy


class LocalDedup:
    """One process alone: the database claim is the whole guard."""

    async def begin(self, delivery_id: uuid.UUID, attempt: int) -> Verdict:
        return Go()

    async def finish(self, delivery_id: uuid.UUID, sent: tuple[str, str | None] | None) -> None:
        return None


class RedisDedup:
    def __init__(self, client: aioredis.Redis, health: RedisHealth, sending_ttl: float) -> None:
        self.client = client
        self.health = health
        self.sending_ttl_ms = max(1, int(sending_ttl * 1000))

    @staticmethod
    def key(delivery_id: uuid.UUID) -> str:
        return f"tidings:send:{delivery_id}"

    async def begin(self, delivery_id: uuid.UUID, attempt: int) -> Verdict:
        if not self.health.should_try():
            return Go()
        key = self.key(delivery_id)
        try:
            if await self.client.set(key, f"sending:{attempt}", nx=True, px=self.sending_ttl_ms):
                self.health.succeeded()
                return Go()
            pipe = self.client.pipeline(transaction=False)
            pipe.get(key)
            pipe.pttl(key)
            value, ttl = await pipe.execute()
        except (RedisError, OSError) as error:
            self.health.failed(error)
            return Go()
        self.health.succeeded()
        return _verdict(value, attempt, ttl)

    async def finish(self, delivery_id: uuid.UUID, sent: tuple[str, str | None] | None) -> None:
        """``sent``: (account, provider message id) after a success; None after anything
        else (the next attempt may go)."""
        if not self.health.should_try():
            return
        key = self.key(delivery_id)
        try:
            if sent is None:
                await self.client.delete(key)
            else:
                await self.client.set(key, f"sent:{sent[0]}:{sent[1] or ''}", ex=SENT_TTL_SECONDS)
        except (RedisError, OSError) as error:
            self.health.failed(error)


Dedup = LocalDedup | RedisDedup


async def send_once(
    dedup: Dedup, delivery: ClaimedDelivery, attempt: Callable[[datetime], Awaitable[Outcome]]
) -> Outcome:
    """``attempt`` (the provider call), behind the fleet's dedup key: a delivery another
    attempt sent already gets that send's outcome, one another attempt is sending waits."""
    verdict = await dedup.begin(delivery.id, delivery.attempts)
    now = utcnow()
    if isinstance(verdict, SentBefore) and not _failed_since(verdict, delivery):
        return Outcome.already_sent(delivery, verdict.provider, verdict.provider_msg_id, now)
    if isinstance(verdict, Busy):
        until = now + timedelta(seconds=verdict.seconds)
        return Outcome.deferred(delivery, until, "sending_elsewhere")
    outcome = await attempt(now)
    sent = outcome.status is Status.SENT
    await dedup.finish(
        delivery.id, (outcome.provider or "", outcome.provider_msg_id) if sent else None
    )
    return outcome


def _failed_since(verdict: SentBefore, delivery: ClaimedDelivery) -> bool:
    """Whether the send the dedup key remembers is one the provider later failed (its
    message id is on the row, which a lost outcome never wrote): the key is stale, send."""
    return delivery.provider_msg_id is not None and (
        verdict.provider_msg_id == delivery.provider_msg_id
    )


def _verdict(value: bytes | str | None, attempt: int, ttl_ms: int) -> Verdict:
    text = value.decode() if isinstance(value, bytes) else (value or "")
    if text.startswith("sent:"):
        _, provider, message_id = text.split(":", 2)
        return SentBefore(provider, message_id or None)
    if text == f"sending:{attempt}" or not text:
        return Go()  # this very attempt (a repeat of begin), or gone meanwhile
    return Busy(max(0.05, ttl_ms / 1000))


class RedisSlots:
    """``max_in_flight`` per account across processes, as leases in a sorted set."""

    def __init__(
        self,
        client: aioredis.Redis,
        health: RedisHealth,
        limits: dict[str, int],
        lease_seconds: float,
    ) -> None:
        self.client = client
        self.health = health
        self.limits = limits
        self.lease_seconds = lease_seconds
        self._take = client.register_script(_TAKE_SLOT)

    @contextlib.asynccontextmanager
    async def slot(self, account: str) -> AsyncIterator[None]:
        """Hold one of the account's slots for the ``with`` block (waits for one)."""
        limit = self.limits.get(account)
        holder = uuid.uuid4().hex
        key = f"tidings:inflight:{account}"
        taken = limit is not None and await self._wait_for_slot(key, holder, limit)
        try:
            yield
        finally:
            if taken:
                with contextlib.suppress(RedisError, OSError):
                    await self.client.zrem(key, holder)

    async def _wait_for_slot(self, key: str, holder: str, limit: int) -> bool:
        """True once a slot is held; False when Redis is down (the local semaphore alone)."""
        while True:
            if not self.health.should_try():
                return False
            try:
                got = await self._take(keys=[key], args=[holder, limit, self.lease_seconds])
            except (RedisError, OSError) as error:
                self.health.failed(error)
                return False
            self.health.succeeded()
            if got:
                return True
            await asyncio.sleep(SLOT_POLL_SECONDS)


# KEYS[1]: the account's holders. ARGV: holder, limit, lease seconds. 1 when taken.
_TAKE_SLOT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
  redis.call('EXPIRE', KEYS[1], math.ceil(tonumber(ARGV[3])) + 60)
  return 1
end
return 0
"""


class BreakerSync:
    """Open breakers shared: what one dispatcher opened, every dispatcher opens."""

    def __init__(self, client: aioredis.Redis, health: RedisHealth, breaker: CircuitBreaker):
        self.client = client
        self.health = health
        self.breaker = breaker

    async def sync(self, accounts: Iterable[str]) -> None:
        names = sorted(accounts)
        if not names or not self.health.should_try():
            return
        keys = [f"tidings:breaker:{name}" for name in names]
        try:
            for name, key in zip(names, keys, strict=True):
                await self._publish(name, key)
            pipe = self.client.pipeline(transaction=False)
            for key in keys:
                pipe.pttl(key)
            remaining = await pipe.execute()
        except (RedisError, OSError) as error:
            self.health.failed(error)
            return
        self.health.succeeded()
        for name, ttl_ms in zip(names, remaining, strict=True):
            if ttl_ms > 0:
                self.breaker.force_open(name, ttl_ms / 1000)

    async def _publish(self, name: str, key: str) -> None:
        """Mark an account this process's breaker holds open (not one it only follows)."""
        state = self.breaker.state(name)
        if state.status is not BreakerStatus.OPEN or self.breaker.forced(name):
            return
        seconds = self.breaker.retry_in(name)
        if seconds > 0:
            await self.client.set(key, "open", px=max(1, int(seconds * 1000)), nx=True)

    async def run(self, stop: asyncio.Event, accounts: Iterable[str]) -> None:
        names = list(accounts)
        while not stop.is_set():
            await self.sync(names)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), BREAKER_SYNC_SECONDS)
