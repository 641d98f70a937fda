"""Provider protection for one dispatcher: rate limits, breakers, failover, bulkheads.

docs/architecture.md, Lanes and reserved rate shares: per account rate limits are never exceeded (a
lane claims only what
it has tokens for), a failing account trips its breaker, transactional email and SMS fail
over down their channel's chain, and each account has its own limit of requests in flight
so that a slow provider stalls only itself.

A lane claims for every channel, so while any primary account is unlimited (the sink, a
push project without a rate) it cannot bound a claim by tokens, and a backlog for a
rate-limited account would be claimed and put back in a loop (hundreds of rows a second
for a few sent, each a write, and CPU that HIGH's sends then wait for). So once a claim put
work back for want of a token, the lane claims for a while (``BOUNDED_CLAIM_SECONDS``) only
as many as the rate-limited accounts have tokens for; rows for unlimited accounts still come
with those claims (oldest first), and a full claim comes again when the while is over.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field

from tidings.dispatch.breaker import BreakerSettings, CircuitBreaker, counts_against
from tidings.dispatch.ratelimit import (
    LocalRateLimiter,
    RateLimiter,
    RateLimitSettings,
    claim_pause,
)
from tidings.dispatch.redis_guards import RedisSlots
from tidings.dispatch.routing import Admission, Target, admit
from tidings.priorities import Category, Channel, Priority
from tidings.providers.base import ProviderError
from tidings.providers.chains import ProviderSet
from tidings.store.claims import ClaimedDelivery

# How long a lane bounds its claims by tokens after a claim put work back for want of one.
BOUNDED_CLAIM_SECONDS = 0.5


@dataclass
class Protection:
    providers: ProviderSet
    breaker: CircuitBreaker
    limiter: RateLimiter
    bulkheads: dict[str, asyncio.Semaphore]
    clock: Callable[[], float] = time.monotonic
    # The fleet's in-flight caps through Redis (None: this process's semaphores alone).
    slots: RedisSlots | None = None
    _pauses: set[asyncio.Task[None]] = field(default_factory=set)
    _targets: dict[tuple[str, str, str | None], Target] = field(default_factory=dict)
    # Per priority: until when claims are bounded by tokens, and the accounts that ran out.
    _bounded: dict[Priority, tuple[float, frozenset[str]]] = field(default_factory=dict)

    @classmethod
    def from_settings(
        cls,
        providers: ProviderSet,
        breaker: BreakerSettings,
        rate_limits: RateLimitSettings,
        limiter: RateLimiter | None = None,
    ) -> Protection:
        """``limiter``: a shared one (Redis); by default this process's own."""
        rates = {name: a.rate_per_second for name, a in providers.accounts.items()}
        return cls(
            providers,
            CircuitBreaker(breaker),
            limiter or LocalRateLimiter.from_settings(rate_limits, rates),
            {
                name: asyncio.Semaphore(account.max_in_flight)
                for name, account in providers.accounts.items()
            },
        )

    @property
    def primaries(self) -> set[str]:
        return {chain[0] for chain in self.providers.chains.values() if chain}

    def claimable(self, priority: Priority, wanted: int) -> int:
        """How many deliveries a lane may claim: no more than its accounts have tokens
        (any unlimited primary: ``wanted``, unless claims are bounded just now)."""
        bounded = self._bounded_accounts(priority)
        total = 0
        for account in self.primaries | (bounded or set()):
            available = self.limiter.available(account, priority)
            if available is None:
                if bounded is None:
                    return wanted
                continue
            total += available
        return min(wanted, total)

    def claim_pause(self, priority: Priority) -> float:
        bounded = self._bounded_accounts(priority)
        if bounded is None:
            return claim_pause(self.limiter, priority, self.primaries)
        limited = [
            account
            for account in self.primaries | bounded
            if self.limiter.available(account, priority) is not None
        ]
        until, _accounts = self._bounded[priority]
        wait = claim_pause(self.limiter, priority, limited) if limited else 0.0
        return min(wait, max(0.0, until - self.clock()))

    def _bounded_accounts(self, priority: Priority) -> frozenset[str] | None:
        """The accounts that ran out of tokens while claims are bounded, else None."""
        found = self._bounded.get(priority)
        if found is None or found[0] <= self.clock():
            return None
        return found[1]

    async def admit(
        self,
        deliveries: Sequence[ClaimedDelivery],
        priority: Priority,
        platforms: Mapping[str, str] | None = None,
    ) -> Admission[ClaimedDelivery]:
        """Route and ration ``deliveries``; ``platforms`` (push token -> ios, android, web)
        choose a platform's own push chain."""
        known = platforms or {}

        def target(delivery: ClaimedDelivery) -> Target:
            return self._target(delivery, known.get(delivery.address))

        admission = await admit(deliveries, priority, target, self.breaker, self.limiter)
        short = frozenset(wait.account for _, wait in admission.defer if wait.account)
        if short:
            self._bounded[priority] = (self.clock() + BOUNDED_CLAIM_SECONDS, short)
        return admission

    def _target(self, delivery: ClaimedDelivery, platform: str | None) -> Target:
        key = (delivery.channel, delivery.category, platform)
        found = self._targets.get(key)
        if found is None:
            chain = self.providers.chain(delivery.channel, platform)
            found = self._targets[key] = Target(Channel(key[0]), Category(key[1]), chain)
        return found

    @contextlib.asynccontextmanager
    async def in_flight(self, account: str) -> AsyncIterator[None]:
        """One of the account's ``max_in_flight`` slots: this process's, and the fleet's
        when they are shared through Redis."""
        async with self.bulkhead(account):
            if self.slots is None:
                yield
                return
            async with self.slots.slot(account):
                yield

    def bulkhead(self, account: str) -> asyncio.Semaphore:
        found = self.bulkheads.get(account)
        if found is None:
            found = self.bulkheads[account] = asyncio.Semaphore(100)
        return found

    def reporter(self, account: str) -> Callable[[BaseException | None], None]:
        """What a send tells the breaker, and, for a 429 with Retry-After, the limiter."""

        def report(error: BaseException | None) -> None:
            self.breaker.record(account, error)
            if (
                isinstance(error, ProviderError)
                and error.retry_after
                and counts_against(error) is None
            ):
                task = asyncio.create_task(self.limiter.pause(account, error.retry_after))
                self._pauses.add(task)
                task.add_done_callback(self._pauses.discard)

        return report
