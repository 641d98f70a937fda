"""Provider protection for one dispatcher: rate limits, breakers, failover, bulkheads.

DESIGN.md §1.4 and §5: per account rate limits are never exceeded (a lane claims only what
it has tokens for), a failing account trips its breaker, transactional email and SMS fail
over down their channel's chain, and each account has its own limit of requests in flight
so that a slow provider stalls only itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from tidings.dispatch.breaker import CircuitBreaker, counts_against
from tidings.dispatch.ratelimit import LocalRateLimiter, RateLimiter, claim_pause
from tidings.dispatch.routing import Admission, Target, admit
from tidings.priorities import Category, Channel, Priority
from tidings.providers.base import ProviderError
from tidings.providers.registry import ProviderSet
from tidings.settings import Settings
from tidings.store.claims import ClaimedDelivery


@dataclass
class Protection:
    providers: ProviderSet
    breaker: CircuitBreaker
    limiter: RateLimiter
    bulkheads: dict[str, asyncio.Semaphore]
    _pauses: set[asyncio.Task[None]] = field(default_factory=set)

    @classmethod
    def from_settings(cls, providers: ProviderSet, settings: Settings) -> Protection:
        rates = {name: a.rate_per_second for name, a in providers.accounts.items()}
        return cls(
            providers,
            CircuitBreaker(settings.breaker),
            LocalRateLimiter.from_settings(settings.rate_limits, rates),
            {
                name: asyncio.Semaphore(account.max_in_flight)
                for name, account in providers.accounts.items()
            },
        )

    @property
    def primaries(self) -> set[str]:
        return {chain[0] for chain in self.providers.chains.values() if chain}

    def claimable(self, priority: Priority, wanted: int) -> int:
        """How many deliveries a lane may claim: no more than its accounts have tokens."""
        total = 0
        for account in self.primaries:
            available = self.limiter.available(account, priority)
            if available is None:
                return wanted
            total += available
        return min(wanted, total)

    def claim_pause(self, priority: Priority) -> float:
        return claim_pause(self.limiter, priority, self.primaries)

    async def admit(
        self, deliveries: Sequence[ClaimedDelivery], priority: Priority
    ) -> Admission[ClaimedDelivery]:
        return await admit(deliveries, priority, self._target, self.breaker, self.limiter)

    def _target(self, delivery: ClaimedDelivery) -> Target:
        return Target(
            Channel(delivery.channel),
            Category(delivery.category),
            self.providers.chain(delivery.channel),
        )

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
