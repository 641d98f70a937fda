"""The dispatcher: one lane per priority, the outcome writer and the reaper.

In direct mode (``tidings dispatch``) its lanes claim due rows from the database and it
expands campaigns too; as a Kafka worker (``tidings worker``, a ``WorkerPlan``) its lanes
consume the relays' topics (dispatch/lanes/kafka.py) and the relays expand campaigns. Both
send through the same pipeline (dispatch/pipeline/sending.py)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import socket
from collections.abc import Mapping
from datetime import timedelta

from tidings.background.reaping import reap_every
from tidings.background.retention import RetentionPlan, maintain_every
from tidings.campaigns.expander import Expander
from tidings.clock import utcnow
from tidings.dispatch.lanes.direct import DirectLane
from tidings.dispatch.lanes.kafka import KafkaLane, WorkerPlan
from tidings.dispatch.lanes.lane import Lane
from tidings.dispatch.pipeline.attempt import Composer, Sender
from tidings.dispatch.pipeline.inbox import InboxProvider, with_inbox
from tidings.dispatch.pipeline.outcomes import OutcomeWriter
from tidings.dispatch.pipeline.retry import RetryPolicy
from tidings.dispatch.pipeline.send_checks import SendTimeChecks
from tidings.dispatch.pipeline.send_starts import SendStarts
from tidings.dispatch.pipeline.sending import LaneContext
from tidings.dispatch.pipeline.types import TypeRulebook
from tidings.dispatch.protection.breaker_share import BreakerShare
from tidings.dispatch.protection.coordination import Coordination
from tidings.dispatch.protection.guard_sync import GuardSync
from tidings.dispatch.protection.protection import Protection
from tidings.ids import new_id
from tidings.priorities import Channel, Priority
from tidings.providers.base import Provider
from tidings.providers.chains import ProviderSet
from tidings.service import Service
from tidings.store import provider_state
from tidings.store.campaigns import CancelledCampaigns
from tidings.store.wakeup import listen_postgres
from tidings.waiting import sleep_unless

log = logging.getLogger(__name__)

# Seconds between reports of this dispatcher's breaker and deactivation guard states
# (GET /v1/providers).
PROVIDER_REPORT_INTERVAL = 2.0
# How long the helpers (reaper, reports, expander, ...) get to finish after ``stop``.
HELPER_GRACE_SECONDS = 5.0
# A dispatcher that has not reported for this long is gone (killed): its share is free.
LIVE_AFTER_SECONDS = 3 * PROVIDER_REPORT_INTERVAL
# How often a dispatcher counts the live ones (a newcomer waits this long, and a half, for
# the others to make room before it sends).
FLEET_REFRESH_SECONDS = 0.5


class Dispatcher:
    def __init__(
        self,
        service: Service,
        providers: ProviderSet | Mapping[Channel, Provider],
        rng: random.Random | None = None,
        worker: WorkerPlan | None = None,
    ) -> None:
        settings = service.settings
        self.worker = worker
        if not isinstance(providers, ProviderSet):
            providers = ProviderSet.per_channel(providers)
        providers = with_inbox(providers, InboxProvider(service.db))
        self.coordination = Coordination.connect(
            settings.redis_url,
            providers,
            settings.rate_limits,
            settings.lease_seconds,
            settings.provider_timeout,
        )
        self.protection = Protection.from_settings(
            providers,
            settings.breaker,
            settings.rate_limits,
            self.coordination.limiter,
            settings.deactivation_guard,
        )
        self.protection.slots = self.coordination.slots
        self.coordination.follow(self.protection.breaker)
        self.service = service
        self.id = f"{socket.gethostname()}:{os.getpid()}:{new_id().hex[-8:]}"
        self.guard_sync = GuardSync(service.db, self.protection.guard, self.id)
        self.breaker_share = BreakerShare(service.db, self.protection.breaker, self.id)
        self.retention = RetentionPlan(
            settings.retention_days,
            settings.idempotency_days,
            settings.partitions_ahead,
            settings.inbox.retention_days,
        )
        self.writer = OutcomeWriter(service.db, settings.outcome_flush_interval)
        retry = RetryPolicy(**settings.retry.model_dump())
        rng = rng or random.Random()
        types = TypeRulebook(service.types, retry)
        self.cancelled = CancelledCampaigns(service.db)
        self.expander = Expander(
            service.db, service.types, service.wakeup, settings.campaigns, self.id, rng
        )
        context = LaneContext(
            db=service.db,
            providers=providers,
            writer=self.writer,
            types=types,
            wakeup=service.wakeup,
            lease_seconds=settings.lease_seconds,
            rng=rng,
            protection=self.protection,
            sender=Sender(
                Composer(
                    service.templates,
                    service.unsubscriber,
                    settings.sms_max_segments,
                    service.engagement,
                ),
                settings.provider_timeout,
                rng,
            ),
            checks=SendTimeChecks(
                service.db, types.rules, rng, settings.quiet_hours_jitter, settings.frequency_caps
            ),
            cancelled=self.cancelled,
            dedup=self.coordination.dedup,
            starts=SendStarts(service.db),
        )
        self.lanes: list[Lane]
        if worker is None:
            self.lanes = [DirectLane(p, settings.lanes.for_priority(p), context) for p in Priority]
        else:
            grace = settings.shutdown_grace
            self.lanes = [
                KafkaLane(p, settings.lanes.for_priority(p), context, worker, grace, self.id)
                for p in worker.priorities
            ]

    async def run(self, stop: asyncio.Event) -> None:
        """Dispatch until ``stop`` is set; then finish or release what is in flight."""
        settings = self.service.settings
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
            asyncio.create_task(maintain_every(self.retention, self.service.db, stop)),
        ]
        if self.worker is None:
            # A worker is woken by its topics; the relays expand campaigns.
            helpers.append(asyncio.create_task(self.expander.run(stop)))
        if self.service.db.dialect.notifies and self.worker is None:
            helpers.append(
                asyncio.create_task(listen_postgres(self.service.db, self.service.wakeup, stop))
            )
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
            await asyncio.gather(*(lane.drain(settings.shutdown_grace) for lane in self.lanes))
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
                await provider_state.forget(self.service.db, self.id)
            await self.coordination.close()

    async def _report_providers(self, stop: asyncio.Event) -> None:
        """Write this dispatcher's breaker states where any API process can read them; the
        rows also say that this dispatcher is alive (``_follow_fleet``)."""
        while not stop.is_set():
            try:
                await self._report()
            except Exception:
                log.exception("reporting provider states failed; trying again")
            await sleep_unless(stop, PROVIDER_REPORT_INTERVAL)

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
        await provider_state.report(self.service.db, self.id, states, utcnow())

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
        dispatchers (those that reported within ``LIVE_AFTER_SECONDS``)."""
        since = utcnow() - timedelta(seconds=LIVE_AFTER_SECONDS)
        live = max(1, await provider_state.live_dispatchers(self.service.db, since))
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
        service = self.service
        await reap_every(service.settings.reaper_interval, service.db, service.wakeup, stop)
