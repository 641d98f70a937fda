"""One admitted delivery's send, under its account's protection: the account's slot in
flight around it, and, once it has run, what the provider call did told to the account's
circuit breaker, deactivation guard and (a 429's Retry-After) rate limiter, then the
guard's verdict on a deactivation the outcome would make.

Admission (``protection.py``) chose the account and took its rate token for a batch; this
is the second and last hop of protection for one delivery, and it wraps the send as
``redis_guards.send_once`` wraps the attempt: the attempt calls the provider and records
how the call went on its ``Outcome`` (``called``, ``call_error``), and this wrapper, not the
attempt, reports it.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from tidings.dispatch.protection.breaker import ROUTE_THROTTLE_REASONS, counts_against
from tidings.dispatch.protection.guard_outcomes import judged
from tidings.dispatch.protection.protection import Protection
from tidings.providers.base import ProviderError
from tidings.store.claims import ClaimedDelivery
from tidings.store.engine import Database
from tidings.store.outcomes import Outcome


@dataclass
class ProtectedCalls:
    """What every send of one dispatcher shares to run under its account's protection."""

    protection: Protection
    db: Database
    rng: random.Random

    async def run(
        self,
        delivery: ClaimedDelivery,
        account: str,
        send: Callable[[], Awaitable[Outcome]],
        stopped: Callable[[], Outcome | None],
    ) -> Outcome:
        """``send``'s outcome, run in one of ``account``'s slots; ``stopped`` (asked once
        the slot is held: a campaign cancelled or paused while this waited) ends it there."""
        protection = self.protection
        try:
            async with protection.in_flight(account):
                early = stopped()
                outcome = early if early is not None else await send()
        except asyncio.CancelledError:
            protection.breaker.cancel(account)  # a reserved half-open probe is not going out
            raise
        if outcome.called:
            report(protection, account, outcome.call_error)
        return await judged(protection.guard, self.db, delivery, account, outcome, rng=self.rng)


def report(protection: Protection, account: str, error: BaseException | None) -> None:
    """What a call to ``account`` did (None: the provider accepted it), to its breaker and
    deactivation guard, and a Retry-After that is the account's own to its limiter (a
    route's throttle, Discord's per webhook, pauses nobody)."""
    protection.breaker.record(account, error)
    protection.guard.record(account, error)
    if (
        isinstance(error, ProviderError)
        and error.retry_after
        and counts_against(error) is None
        and error.reason not in ROUTE_THROTTLE_REASONS
    ):
        protection.pause(account, error.retry_after)
