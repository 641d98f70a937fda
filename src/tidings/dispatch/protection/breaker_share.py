"""Circuit breakers shared by the fleet through the database, with or without Redis: each
dispatcher's ``provider_state`` report already carries its breakers (dispatcher.py), so a
dispatcher reads its peers' reports every ``SHARE_SECONDS`` and

- opens an account a peer's own breaker holds open, for the rest of that peer's open time
  (an opening that was itself followed, ``forced``, is not passed on: no echo keeps an
  account open after its opener closed it);
- opens an account once the fleet's run of transient failures reaches the breaker's
  ``consecutive_failures``: its own run plus each closed peer's (the part of it inside the
  breaker's window), so N dispatchers spend about one threshold on a dead provider, not N.
  That opening is its own (``trip``): a peer whose rows were all deferred meanwhile, and so
  has no failures to count, follows it.

It reports at once (not at the next 2 s report) when one of its breakers changes, so that
its peers learn of an opening, or of a run of failures, within one share interval."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from datetime import datetime

from tidings.clock import utcnow
from tidings.dispatch.protection.breaker import BreakerStatus, CircuitBreaker
from tidings.store import provider_state
from tidings.store.engine import Database
from tidings.store.provider_state import ProviderReport
from tidings.waiting import sleep_unless

log = logging.getLogger(__name__)

SHARE_SECONDS = 0.5


class BreakerShare:
    def __init__(self, db: Database, breaker: CircuitBreaker, dispatcher: str) -> None:
        self.db = db
        self.breaker = breaker
        self.dispatcher = dispatcher
        self._reported: dict[str, tuple[str, int, bool]] = {}

    async def run(
        self, stop: asyncio.Event, accounts: Iterable[str], report: Callable[[], Awaitable[None]]
    ) -> None:
        """Until ``stop``: report when a breaker changed (``report`` writes every account's
        state), then follow the peers' reports."""
        names = sorted(accounts)
        while not stop.is_set():
            try:
                if self._changed(names):
                    await report()
                await self.follow(names, await self._peers())
            except Exception as error:
                log.warning("sharing breakers through the database failed (%s)", error)
            await sleep_unless(stop, SHARE_SECONDS)

    def _changed(self, names: list[str]) -> bool:
        """Whether a breaker changed since the last call (its state, run or origin)."""
        now = {}
        for name in names:
            seen = self.breaker.state(name)
            forced = seen.status is not BreakerStatus.CLOSED and self.breaker.forced(name)
            now[name] = (seen.status.value, seen.failures, forced)
        changed = now != self._reported
        self._reported = now
        return changed

    async def _peers(self) -> list[ProviderReport]:
        """The live peers' reports (a report older than ``LIVE_SECONDS`` is from a
        dispatcher that is gone)."""
        rows = await provider_state.reports(self.db, provider_state.live_since(utcnow()))
        return [row for row in rows if row.dispatcher != self.dispatcher]

    async def follow(self, names: list[str], peers: list[ProviderReport]) -> None:
        """Open what the peers' reports say is open, or failing, fleet-wide."""
        now = utcnow()
        threshold = self.breaker.settings.consecutive_failures
        for name in names:
            mine = self.breaker.state(name)
            reports = [row for row in peers if row.account == name]
            held = max((_open_for(row, now) for row in reports), default=0.0)
            if held > 0:
                if mine.status is not BreakerStatus.OPEN or self.breaker.retry_in(name) < held:
                    log.info("%s: a peer's breaker is open, opening for %.1fs", name, held)
                    self.breaker.force_open(name, held)
                continue
            if mine.status is not BreakerStatus.CLOSED:
                continue
            run = mine.failures + sum(_failing(row) for row in reports)
            if run >= threshold:
                log.info("%s: %d transient failures in a row across the fleet, opening", name, run)
                self.breaker.trip(name)


def _open_for(row: ProviderReport, now: datetime) -> float:
    """Seconds a peer's own opening still holds, as of ``now`` (0 for none)."""
    state = row.state
    if state.get("state") != BreakerStatus.OPEN.value or state.get("forced"):
        return 0.0
    age: float = (now - row.updated_at).total_seconds()
    return max(0.0, float(state.get("retryInSeconds") or 0.0) - age)


def _failing(row: ProviderReport) -> int:
    """A closed peer's run of transient failures, only its part inside the window."""
    state = row.state
    if state.get("state") != BreakerStatus.CLOSED.value:
        return 0
    return min(int(state.get("consecutiveFailures") or 0), int(state.get("windowFailures") or 0))
