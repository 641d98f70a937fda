"""Rate limits per provider account, with a share of the rate per priority (docs/architecture.md,
Lanes and reserved rate shares).

Semantics (``LocalRateLimiter``; a Redis implementation must keep them):

- Every account with a rate ``R`` (sends per second) has one **shared bucket** of capacity
  ``C = max(1, R * burst_seconds)`` tokens, full at start and refilled continuously at ``R``.
  Every grant, whatever its priority, takes its tokens from it, so over ANY window of ``W``
  seconds the account is granted at most ``R * W + C``. Keep ``burst_seconds`` at most the
  provider's own bucket (the simulator's is one second's worth); the default of 0.5 s leaves
  half a second of slack for the jitter between our grant and the request's arrival.
- Each priority ``p`` has a share ``s(p)`` (default LOW 0.6, NORMAL 0.9, HIGH 1.0; shares
  must not decrease with urgency). Shares are **cumulative caps**: everything sent at ``p``
  *or any less urgent priority* is at most ``s(p) * R``. So LOW alone <= 60 %, NORMAL and LOW
  together <= 90 %, and at least 10 % of the rate is always left to HIGH. Each share below
  1 is a **class bucket** of rate ``s(p) * R`` and capacity ``max(1, s(p) * C)``, taken
  from by grants at ``p`` and below.
- **Headroom**: a grant at ``p`` must also leave the shared bucket at least
  ``(1 - s(p)) * (C - 1)`` tokens. A burst of NORMAL/LOW work can therefore never empty the
  bucket: HIGH always finds the reserve (10 % of it against NORMAL, 40 % against LOW). When
  every priority keeps asking, HIGH takes each token as it arrives and the others get only
  what HIGH leaves: strict priority under saturation, shares as caps when HIGH is idle.
  (The ``- 1`` lets every priority take one token from a full bucket even when ``C`` is 1.)
- ``acquire`` never waits: it grants what it can now (0..wanted) and ``next_token_in`` says
  when one more could be granted. ``pause`` (after a provider's 429 with Retry-After) puts
  the shared bucket into debt so that nothing is granted for that long.
- Accounts without a rate are unlimited.

How a lane uses it: it asks ``available`` per channel's account to size its claims (one
per rate-limited channel: ``Protection.claim_budgets``), claims, routes each delivery to an
account (``tidings.dispatch.protection.routing.admit``), acquires per account, and defers the ones
without a token (``attempt.deferred``: the attempt is given back) until ``next_token_in``;
``claim_pause`` tells it how long to sleep when no account has a token.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from pydantic import BaseModel, Field, field_validator

from tidings.priorities import Priority

# Float tolerance when turning a bucket level into whole tokens.
_EPSILON = 1e-9

DEFAULT_SHARES: dict[Priority, float] = {
    Priority.LOW: 0.6,
    Priority.NORMAL: 0.9,
    Priority.HIGH: 1.0,
}


class RateLimitSettings(BaseModel):
    """Shares of an account's rate per priority, and the depth of its bucket."""

    shares: dict[Priority, float] = Field(default_factory=lambda: dict(DEFAULT_SHARES))
    # Seconds' worth of the rate that may be sent at once; at most the provider's bucket.
    burst_seconds: float = Field(default=0.5, gt=0, le=10)

    @field_validator("shares")
    @classmethod
    def _monotonic(cls, shares: dict[Priority, float]) -> dict[Priority, float]:
        return validate_shares(shares)


def validate_shares(shares: Mapping[Priority, float]) -> dict[Priority, float]:
    """All three priorities, each in (0, 1], never a larger share for a less urgent one."""
    full = dict(DEFAULT_SHARES) | dict(shares)
    for priority, share in full.items():
        if not 0 < share <= 1:
            raise ValueError(f"share of {priority.value} must be in (0, 1], not {share}")
    if not full[Priority.LOW] <= full[Priority.NORMAL] <= full[Priority.HIGH]:
        raise ValueError("shares must not grow as priority falls (low <= normal <= high)")
    return full


class RateLimiter(Protocol):
    """Tokens per provider account; one per process, or shared through Redis."""

    async def acquire(self, account: str, priority: Priority, wanted: int) -> int:
        """Take up to ``wanted`` tokens now, without waiting; returns how many were taken."""
        ...

    def available(self, account: str, priority: Priority) -> int | None:
        """Tokens ``acquire`` would grant now (None: unlimited), taking none."""
        ...

    def next_token_in(self, account: str, priority: Priority) -> float:
        """Seconds until one more token could be granted at ``priority`` (0: now).

        A shared implementation may answer from what its last ``acquire`` learnt."""
        ...

    async def pause(self, account: str, seconds: float) -> None:
        """Grant nothing for ``account`` for ``seconds`` (the provider said 429)."""
        ...

    def set_share(self, share: float) -> None:
        """This process's part of each rate when nothing shares the limits (1 / the live
        dispatchers); a shared limiter applies it only while it cannot share."""
        ...

    def drain(self) -> None:
        """Empty this process's own buckets (joining a fleet that sends at the full rate)."""
        ...


@dataclass
class _Bucket:
    rate: float
    capacity: float
    level: float
    updated: float

    def refill(self, now: float) -> None:
        if now > self.updated:
            self.level = min(self.capacity, self.level + (now - self.updated) * self.rate)
            self.updated = now

    def whole(self, floor: float = 0.0) -> int:
        """Whole tokens above ``floor``."""
        return max(0, math.floor(self.level - floor + _EPSILON))

    def wait_for(self, needed: float) -> float:
        """Seconds until the level reaches ``needed``."""
        return max(0.0, (needed - self.level) / self.rate)


@dataclass
class _Account:
    shared: _Bucket
    # Class bucket per priority whose share is below 1.
    classes: dict[Priority, _Bucket] = field(default_factory=dict)

    def buckets_for(self, priority: Priority) -> list[_Bucket]:
        """The class buckets a grant at ``priority`` takes from: its own and those of every
        more urgent priority (their caps include less urgent traffic)."""
        return [bucket for cap, bucket in self.classes.items() if priority.at_most(cap)]


class LocalRateLimiter:
    """The in-process limiter: one shared bucket plus class buckets per account."""

    def __init__(
        self,
        rates: Mapping[str, float],
        shares: Mapping[Priority, float] | None = None,
        burst_seconds: float = 0.5,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if burst_seconds <= 0:
            raise ValueError("burst_seconds must be positive")
        self.shares = validate_shares(shares or DEFAULT_SHARES)
        self.burst_seconds = burst_seconds
        self._clock = clock
        self._rates = dict(rates)
        self._share = 1.0
        self._accounts = {name: self._new_account(rate) for name, rate in rates.items()}

    def drain(self) -> None:
        """Empty every bucket: what this process takes over from a fleet that was sending
        at the full rate (joining it, or Redis gone) must not start with a burst."""
        now = self._clock()
        for state in self._accounts.values():
            for bucket in (state.shared, *state.classes.values()):
                bucket.level, bucket.updated = min(bucket.level, 0.0), now

    def set_share(self, share: float) -> None:
        """Use ``share`` (0 < share <= 1) of every account's rate: this process's part when
        several dispatchers send through the same accounts without a shared limiter."""
        share = min(1.0, max(share, 1e-6))
        if share == self._share:
            return
        self._share = share
        now = self._clock()
        for name, state in self._accounts.items():
            rate = self._rates[name] * share
            capacity = max(1.0, rate * self.burst_seconds)
            state.shared.refill(now)
            state.shared.rate, state.shared.capacity = rate, capacity
            state.shared.level = min(state.shared.level, capacity)
            for priority, bucket in state.classes.items():
                bucket.refill(now)
                bucket.rate = self.shares[priority] * rate
                bucket.capacity = max(1.0, self.shares[priority] * capacity)
                bucket.level = min(bucket.level, bucket.capacity)

    @classmethod
    def from_settings(
        cls,
        settings: RateLimitSettings,
        rates: Mapping[str, float | None],
        clock: Callable[[], float] = time.monotonic,
    ) -> LocalRateLimiter:
        """``rates``: account name -> ``rate_per_second`` (None: unlimited)."""
        limited = {name: rate for name, rate in rates.items() if rate is not None}
        return cls(limited, settings.shares, settings.burst_seconds, clock)

    def _new_account(self, rate: float) -> _Account:
        if rate <= 0:
            raise ValueError(f"rate must be positive, not {rate}")
        now = self._clock()
        capacity = max(1.0, rate * self.burst_seconds)
        account = _Account(_Bucket(rate, capacity, capacity, now))
        for priority, share in self.shares.items():
            if share < 1:
                size = max(1.0, share * capacity)
                account.classes[priority] = _Bucket(share * rate, size, size, now)
        return account

    def capacity(self, account: str) -> float | None:
        """Tokens the account's shared bucket holds when full (None: unlimited)."""
        state = self._accounts.get(account)
        return None if state is None else state.shared.capacity

    def reserve(self, account: str, priority: Priority) -> float:
        """Tokens a grant at ``priority`` must leave in the shared bucket."""
        state = self._accounts.get(account)
        if state is None:
            return 0.0
        return (1 - self.shares[priority]) * (state.shared.capacity - 1)

    async def acquire(self, account: str, priority: Priority, wanted: int) -> int:
        return self.try_acquire(account, priority, wanted)

    def try_acquire(self, account: str, priority: Priority, wanted: int) -> int:
        """``acquire`` without the coroutine (it never waits anyway)."""
        state = self._accounts.get(account)
        if state is None or wanted <= 0:
            return max(0, wanted)
        buckets = self._refilled(state, priority)
        granted = min(wanted, state.shared.whole(self.reserve(account, priority)))
        for bucket in buckets:
            granted = min(granted, bucket.whole())
        if granted > 0:
            state.shared.level -= granted
            for bucket in buckets:
                bucket.level -= granted
        return granted

    def available(self, account: str, priority: Priority) -> int | None:
        """Tokens a grant at ``priority`` could take now, without taking them (None:
        unlimited)."""
        state = self._accounts.get(account)
        if state is None:
            return None
        buckets = self._refilled(state, priority)
        granted = state.shared.whole(self.reserve(account, priority))
        return min([granted, *(bucket.whole() for bucket in buckets)])

    def next_token_in(self, account: str, priority: Priority) -> float:
        state = self._accounts.get(account)
        if state is None:
            return 0.0
        buckets = self._refilled(state, priority)
        wait = state.shared.wait_for(self.reserve(account, priority) + 1 - _EPSILON)
        for bucket in buckets:
            wait = max(wait, bucket.wait_for(1 - _EPSILON))
        return wait

    async def pause(self, account: str, seconds: float) -> None:
        state = self._accounts.get(account)
        if state is None or seconds <= 0:
            return
        state.shared.refill(self._clock())
        # Debt that the refill pays back in exactly ``seconds``.
        state.shared.level = min(state.shared.level, -seconds * state.shared.rate)

    def _refilled(self, state: _Account, priority: Priority) -> list[_Bucket]:
        now = self._clock()
        state.shared.refill(now)
        buckets = state.buckets_for(priority)
        for bucket in buckets:
            bucket.refill(now)
        return buckets


async def ration(
    limiter: RateLimiter, priority: Priority, demand: Mapping[str, int]
) -> dict[str, int]:
    """Tokens granted now per account for ``demand`` (account -> deliveries wanting one)."""
    return {
        account: await limiter.acquire(account, priority, wanted)
        for account, wanted in demand.items()
        if wanted > 0
    }


def claim_pause(limiter: RateLimiter, priority: Priority, accounts: Iterable[str]) -> float:
    """Seconds a lane should wait before claiming: 0 when any account it may send to (and
    an unlimited one always can) has a token for ``priority``, else the earliest refill."""
    waits = [limiter.next_token_in(account, priority) for account in accounts]
    return min(waits, default=0.0)
