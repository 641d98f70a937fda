"""Provider protection for one dispatcher: rate limits, breakers, failover, bulkheads.

docs/architecture.md, Lanes and reserved rate shares: per account rate limits are never exceeded (a
lane claims only what
it has tokens for), a failing account trips its breaker, transactional email and SMS fail
over down their channel's chain, and each account has its own limit of requests in flight
so that a slow provider stalls only itself. A push account whose deactivation guard tripped
is held as an open breaker holds it (dispatch/protection/deactivation_guard.py).

A lane sizes its claims by the accounts the claimed rows will use (``claim_budgets``): one
claim for the channels whose account is unlimited (the sink, a push project without a
rate), and one per rate-limited channel of no more than that channel's account has tokens
for. Summing every account's tokens instead let an idle account of another channel lend
its tokens to a backlog that could not use them: claimed, a few sent, the rest put back,
over and over.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field

from tidings.dispatch.protection.breaker import BreakerSettings, CircuitBreaker
from tidings.dispatch.protection.deactivation_guard import (
    HELD,
    DeactivationGuard,
    DeactivationGuardSettings,
    GuardStatus,
)
from tidings.dispatch.protection.ratelimit import (
    LocalRateLimiter,
    RateLimiter,
    RateLimitSettings,
    claim_pause,
)
from tidings.dispatch.protection.redis_guards import RedisSlots
from tidings.dispatch.protection.routing import Admission, Defer, Target, admit
from tidings.dispatch.protection.token_waits import TokenWaits
from tidings.priorities import Category, Channel, Priority
from tidings.providers.chains import ProviderSet
from tidings.store.claims import ClaimedDelivery


@dataclass
class Protection:
    providers: ProviderSet
    breaker: CircuitBreaker
    limiter: RateLimiter
    bulkheads: dict[str, asyncio.Semaphore]
    clock: Callable[[], float] = time.monotonic
    # The fleet's in-flight caps through Redis (None: this process's semaphores alone).
    slots: RedisSlots | None = None
    guard: DeactivationGuard = field(default_factory=DeactivationGuard)
    token_waits: TokenWaits = field(default_factory=TokenWaits)
    _pauses: set[asyncio.Task[None]] = field(default_factory=set)
    _targets: dict[tuple[str, str, str | None], Target] = field(default_factory=dict)

    @classmethod
    def from_settings(
        cls,
        providers: ProviderSet,
        breaker: BreakerSettings,
        rate_limits: RateLimitSettings,
        limiter: RateLimiter | None = None,
        guard: DeactivationGuardSettings | None = None,
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
            guard=DeactivationGuard(guard),
        )

    @property
    def primaries(self) -> set[str]:
        return {chain[0] for chain in self.providers.chains.values() if chain}

    def claim_budgets(self, priority: Priority, wanted: int) -> list[tuple[frozenset[str], int]]:
        """What a lane may claim now, by the accounts the rows will use: one claim of up to
        ``wanted`` for the channels whose account is unlimited, and one per rate-limited
        channel of no more than its account has tokens for (an idle account of another
        channel lends none). The account is the first in the chain its breaker allows."""
        unlimited: set[str] = set()
        budgets: list[tuple[frozenset[str], int]] = []
        for channel, accounts in self._channel_accounts().items():
            tokens = self._tokens(accounts, priority)
            if tokens is None:
                unlimited.add(channel)
            else:
                budgets.append((frozenset({channel}), min(wanted, tokens)))
        if unlimited:
            budgets.insert(0, (frozenset(unlimited), wanted))
        return budgets

    def channel_budget(self, priority: Priority, channel: str, wanted: int) -> int:
        """How many of ``channel``'s deliveries may be taken now (a Kafka worker's topic)."""
        accounts = self._channel_accounts().get(channel)
        if not accounts:
            return wanted
        tokens = self._tokens(accounts, priority)
        return wanted if tokens is None else min(wanted, tokens)

    def _tokens(self, accounts: set[str], priority: Priority) -> int | None:
        """The tokens ``accounts`` hold for ``priority``; None when one is unlimited."""
        found = {account: self.limiter.available(account, priority) for account in accounts}
        self.token_waits.saw(found, priority)  # how long an account had none (metrics)
        tokens = list(found.values())
        if any(t is None for t in tokens):
            return None
        return sum(t or 0 for t in tokens)

    def _channel_accounts(self) -> dict[str, set[str]]:
        """Per channel, the accounts its next sends go to (push: every platform's chain)."""
        found: dict[str, set[str]] = {}
        for name, chain in self.providers.chains.items():
            if not chain:
                continue
            allowed = [a for a in chain if self.breaker.would_allow(a)]
            found.setdefault(name.split("_")[0], set()).add((allowed or chain)[0])
        return found

    def budget_pause(self, priority: Priority) -> float:
        """Seconds until any rate-limited channel's account has a token (0 when there is
        no rate-limited account)."""
        accounts = {
            account
            for accounts in self._channel_accounts().values()
            for account in accounts
            if self.limiter.available(account, priority) is not None  # rate-limited
        }
        return claim_pause(self.limiter, priority, accounts)

    def forget_estimates(self, priority: Priority) -> None:
        """A restarted lane's limiter estimates start afresh (a shared limiter's may be
        stale: Redis restarted empty). A limiter that keeps exact state has none."""
        forget = getattr(self.limiter, "forget", None)
        if forget is not None:
            forget(priority)

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

        held, probes, rest = self._guarded(deliveries, target)
        admission = await admit(rest, priority, target, self.breaker, self.limiter)
        for delivery, _ in admission.defer:
            if delivery.id in probes:  # a reserved probe that is not going out
                self.guard.cancel(probes[delivery.id])
        admission.defer.extend(held)
        return admission

    def _guarded(
        self, deliveries: Sequence[ClaimedDelivery], target: Callable[[ClaimedDelivery], Target]
    ) -> tuple[list[tuple[ClaimedDelivery, Defer]], dict[uuid.UUID, str], list[ClaimedDelivery]]:
        """The push deliveries whose account's deactivation guard holds them, the probes it
        let through (delivery id -> account), and the rest. Push never fails over, so its
        account is the chain's first."""
        held: list[tuple[ClaimedDelivery, Defer]] = []
        probes: dict[uuid.UUID, str] = {}
        rest: list[ClaimedDelivery] = []
        for delivery in deliveries:
            chain = target(delivery).chain if delivery.channel == Channel.PUSH.value else ()
            wait = self.guard.admit(chain[0]) if chain else 0.0
            if wait > 0:
                held.append((delivery, Defer(wait, HELD, chain[0])))
                continue
            if chain and self.guard.status(chain[0]) is GuardStatus.PROBING:
                probes[delivery.id] = chain[0]
            rest.append(delivery)
        return held, probes, rest

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

    def pause(self, account: str, seconds: float) -> None:
        """No tokens for ``account`` for ``seconds`` (its provider's Retry-After)."""
        task = asyncio.create_task(self.limiter.pause(account, seconds))
        self._pauses.add(task)
        task.add_done_callback(self._pauses.discard)
