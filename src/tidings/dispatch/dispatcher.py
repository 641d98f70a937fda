"""The dispatcher: one lane per priority, the outcome writer and the helpers beside them
(reaper, provider reports, fleet shares, breaker and guard sharing, cancelled campaigns,
retention, the campaign expander).

In direct mode (``tidings dispatch``) its lanes claim due rows from the database and it
expands campaigns too; as a Kafka worker (``tidings worker``, a ``WorkerPlan``) its lanes
consume the relays' topics (dispatch/lanes/kafka.py) and the relays expand campaigns. Both
send through the same pipeline (dispatch/pipeline/sending.py). Its parts are built and
wired by ``tidings/assembly.assemble_dispatcher``."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass

from tidings.background.reaping import reap_every
from tidings.background.retention import RetentionPlan, maintain_every
from tidings.campaigns.expander import Expander
from tidings.clock import utcnow
from tidings.dispatch.lanes.lane import Lane
from tidings.dispatch.pipeline.outcomes import OutcomeWriter
from tidings.dispatch.protection.breaker_share import BreakerShare
from tidings.dispatch.protection.coordination import Coordination
from tidings.dispatch.protection.guard_sync import GuardSync
from tidings.dispatch.protection.protection import Protection
from tidings.store import provider_state
from tidings.store.campaigns import CancelledCampaigns
from tidings.store.engine import Database
from tidings.store.wakeup import Wakeup, listen_postgres
from tidings.waiting import sleep_unless
from tidings.workflows.runner import StepRunner

log = logging.getLogger(__name__)

# How long the helpers (reaper, reports, expander, ...) get to finish after ``stop``.
HELPER_GRACE_SECONDS = 5.0
# How often a dispatcher counts the live ones (a newcomer waits this long, and a half, for
# the others to make room before it sends).
FLEET_REFRESH_SECONDS = 0.5


@dataclass(eq=False)
class Dispatcher:
    id: str  # this process among the fleet's reports: host:pid:random
    db: Database
    wakeup: Wakeup
    lanes: list[Lane]
    writer: OutcomeWriter
    protection: Protection
    coordination: Coordination
    guard_sync: GuardSync
    breaker_share: BreakerShare
    cancelled: CancelledCampaigns
    retention: RetentionPlan
    expander: Expander | None  # None for a Kafka worker: the relays expand campaigns
    listens: bool  # woken by PostgreSQL's notifies (direct lanes only)
    reaper_interval: float
    shutdown_grace: float

    async def run(self, stop: asyncio.Event) -> None:
        """Dispatch until ``stop`` is set; then finish or release what is in flight."""
        writer_stop = asyncio.Event()
        writer = asyncio.create_task(self.writer.run(writer_stop))
        with contextlib.suppress(Exception):
            await self.cancelled.refresh(utcnow())  # before the first claim, if it can
        with contextlib.suppress(Exception):
            await self._join_fleet()  # this process's share before its first send
        helpers = [
            asyncio.create_task(self._reap_every(stop)),
            asyncio.create_task(self._report_providers(stop)),
            asyncio.create_task(self._follow_fleet(stop)),
            asyncio.create_task(self._refresh_cancelled(stop)),
            asyncio.create_task(maintain_every(self.retention, self.db, stop)),
            # Workflow steps (docs/workflows.md): their sends become PENDING deliveries.
            asyncio.create_task(StepRunner(self.db, self.wakeup.notify).run(stop)),
        ]
        if self.expander is not None:
            helpers.append(asyncio.create_task(self.expander.run(stop)))
        if self.listens:
            helpers.append(asyncio.create_task(listen_postgres(self.db, self.wakeup, stop)))
        if self.protection.guard.enabled:
            helpers.append(asyncio.create_task(self.guard_sync.run(stop)))
        accounts = list(self.protection.providers.providers)
        # Through the database always: without Redis, or while it is down, too.
        helpers.append(asyncio.create_task(self.breaker_share.run(stop, accounts, self._report)))
        if self.coordination.breakers is not None:
            helpers.append(asyncio.create_task(self.coordination.breakers.run(stop, accounts)))
        try:
            await asyncio.gather(*(lane.run(stop) for lane in self.lanes))
        finally:
            await asyncio.gather(*(lane.drain(self.shutdown_grace) for lane in self.lanes))
            writer_stop.set()
            await writer
            # Each helper ends by itself once ``stop`` is set. Cancelling one in the middle
            # of a SQLite transaction could leave the database's one write lock held, and
            # the last writes of the shutdown waiting for it.
            _, late = await asyncio.wait(helpers, timeout=HELPER_GRACE_SECONDS)
            for helper in late:
                helper.cancel()
            await asyncio.gather(*helpers, return_exceptions=True)
            with contextlib.suppress(Exception):
                await provider_state.forget(self.db, self.id)
            await self.coordination.close()

    async def _report_providers(self, stop: asyncio.Event) -> None:
        """Write this dispatcher's breaker states where any API process can read them; the
        rows also say that this dispatcher is alive (``_follow_fleet``)."""
        while not stop.is_set():
            try:
                await self._report()
            except Exception:
                log.exception("reporting provider states failed; trying again")
            await sleep_unless(stop, provider_state.REPORT_SECONDS)

    async def _report(self) -> None:
        breaker = self.protection.breaker
        for account in self.protection.providers.providers:
            breaker.state(account)  # so that accounts not used yet are listed too
        states = breaker.snapshot()
        shared = self.coordination.snapshot()
        guards = self.protection.guard.snapshot(states)
        lanes = [lane.progress.snapshot() for lane in self.lanes]
        for account, state in states.items():
            state["coordination"] = shared
            state["lanes"] = lanes  # each lane's progress (dispatch/lanes/progress.py)
            state["deactivationGuard"] = guards[account]
        await provider_state.report(self.db, self.id, states, utcnow())

    async def _join_fleet(self) -> None:
        """Report, count the fleet, take this process's share; when others are sending
        already, start with empty buckets and give them a refresh to make room."""
        await self._report()
        if await self._take_share() > 1 and self.coordination.limiter is None:
            self.protection.limiter.drain()
            await asyncio.sleep(FLEET_REFRESH_SECONDS * 1.5)

    async def _follow_fleet(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await sleep_unless(stop, FLEET_REFRESH_SECONDS)
            try:
                await self._take_share()
            except Exception:
                log.exception("counting live dispatchers failed; keeping the last share")

    async def _take_share(self) -> int:
        """This process's share of each rate while limits are not shared: 1 / the live
        dispatchers (those that reported within ``provider_state.LIVE_SECONDS``)."""
        since = provider_state.live_since(utcnow())
        live = max(1, await provider_state.live_dispatchers(self.db, since))
        share = 1 / live
        if share != self.coordination.share:
            log.info(
                "%d live dispatchers: without shared limits this one takes %.0f%% of each rate",
                live,
                100 * share,
            )
        self.coordination.share = share
        self.protection.limiter.set_share(share)
        return live

    async def _refresh_cancelled(self, stop: asyncio.Event) -> None:
        """Keep the cancelled campaigns known at most ``interval`` stale (their claimed
        deliveries are dropped before the provider call)."""
        while not stop.is_set():
            try:
                await self.cancelled.refresh(utcnow())
            except Exception:
                log.exception("reading cancelled campaigns failed; trying again")
            await sleep_unless(stop, self.cancelled.interval)

    async def _reap_every(self, stop: asyncio.Event) -> None:
        await reap_every(self.reaper_interval, self.db, self.wakeup, stop)
