"""A direct lane: the claim loop of one priority, with its own concurrency; what it claims
is sent by the shared pipeline (dispatch/pipeline/sending.py)."""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import timedelta

from tidings.clock import utcnow
from tidings.dispatch.lanes.progress import LaneWatch
from tidings.dispatch.lanes.settings import LaneSettings
from tidings.dispatch.pipeline.sending import LaneContext, SendPipeline, error_name, error_where
from tidings.priorities import Channel, Priority
from tidings.store.claims import ClaimedDelivery, claim_due
from tidings.store.lane_work import has_due
from tidings.waiting import first_of, sleep_unless

log = logging.getLogger(__name__)

ALL_CHANNELS = frozenset(channel.value for channel in Channel)
# How long a busy lane waits for more free slots before claiming for just a few.
GATHER_SECONDS = 0.002
# How long a step gets to see that the lane stops (or restarts) before it is cancelled.
STEP_SETTLE = 2.0
# How long sends a stalled lane still runs get before they are given back at its restart.
STALLED_SEND_GRACE = 1.0

__all__ = ["DirectLane"]


class DirectLane:
    def __init__(self, priority: Priority, settings: LaneSettings, context: LaneContext) -> None:
        self.priority = priority
        self.settings = settings
        self.context = context
        self.pipeline = SendPipeline(priority, context)
        self._min_claim = max(1, min(settings.concurrency, settings.claim_batch) // 4)
        # Channel groups whose last claim found nothing due: until when not to ask again.
        self._resting: dict[frozenset[str], float] = {}
        self.progress = self.pipeline.progress
        self.watch = LaneWatch(
            self.progress, settings.stall_seconds, self._has_work, self._reset, STEP_SETTLE
        )

    @property
    def in_flight(self) -> int:
        return self.pipeline.in_flight

    async def run(self, stop: asyncio.Event) -> None:
        """Claim and send until ``stop``; then let in-flight sends finish (see ``drain``).
        A stalled lane is restarted (dispatch/lanes/progress.py)."""
        await self.watch.supervise(self._loop, stop)

    async def _loop(self, end: asyncio.Event) -> None:
        while not end.is_set():
            try:
                await self._step(end)
            except Exception as error:
                # Whatever escaped the per-delivery guards must not end the dispatcher: the
                # deliveries of this step come back when their leases expire.
                lane = self.priority.value
                log.error(
                    "%s lane: step failed (%s)\n%s", lane, error_name(error), error_where(error)
                )
                await sleep_unless(end, self.settings.poll_interval)

    async def _has_work(self) -> bool:
        """Due deliveries wait for this lane, or its sends do not end."""
        return self.in_flight > 0 or await has_due(self.context.db, self.priority, utcnow())

    async def _reset(self) -> None:
        """After a stall: sends still hanging are given back, and the lane's rests and
        token estimates start afresh."""
        await self.pipeline.drain(STALLED_SEND_GRACE)
        self._resting.clear()
        self.context.protection.forget_estimates(self.priority)

    async def _step(self, stop: asyncio.Event) -> None:
        """Claim what there are free slots and tokens for, check it, start its sends."""
        free = self.settings.concurrency - self.in_flight
        if free <= 0:
            await first_of(self.pipeline.slot_freed.wait(), stop.wait())
            self.pipeline.slot_freed.clear()
            return
        if self.in_flight and free < self._min_claim:
            # Busy: let a few more slots free up so that one claim fills several.
            await sleep_unless(stop, GATHER_SECONDS)
            free = self.settings.concurrency - self.in_flight
        wanted = min(free, self.settings.claim_batch)
        budgets = self._open(self.context.protection.claim_budgets(self.priority, wanted))
        if not any(limit for _, limit in budgets):
            # Out of tokens, or nothing due where there are: claim nothing now, so that
            # nothing is claimed only to be put back, and no empty claim is repeated.
            await self._rest(stop)
            return
        claimed: list[ClaimedDelivery] = []
        more_due = False
        for channels, limit in budgets:
            ask = min(limit, wanted - len(claimed))
            if ask <= 0:
                more_due = more_due or limit > 0
                continue
            got = await self._claim(ask, channels)
            claimed += got
            if len(got) < ask:
                # Nothing more due on these channels: not asked again for a poll interval
                # (or until woken). A claim that finds nothing can read the whole due
                # index of the priority, a backlog of another channel included.
                self._resting[channels] = time.monotonic() + self.settings.poll_interval
            else:
                more_due = True
        await self.pipeline.process(claimed)
        if not more_due:
            # Nothing more is due: sleep until woken, or until the next poll.
            await self._sleep(stop, self.settings.poll_interval)
            self._resting.clear()

    def _open(self, budgets: list[tuple[frozenset[str], int]]) -> list[tuple[frozenset[str], int]]:
        """``budgets`` without the channels resting after a claim that found nothing."""
        now = time.monotonic()
        return [(c, 0 if self._resting.get(c, 0.0) > now else limit) for c, limit in budgets]

    async def _rest(self, stop: asyncio.Event) -> None:
        """No budget now: sleep until a token comes, a rest ends or a wake-up."""
        pause = self.context.protection.budget_pause(self.priority)
        now = time.monotonic()
        ends = [until - now for until in self._resting.values() if until > now]
        within = min([self.settings.poll_interval, *ends] + ([pause] if pause > 0 else []))
        await self._sleep(stop, max(within, 0.005))

    async def _sleep(self, stop: asyncio.Event, within: float) -> None:
        """Until ``within`` seconds pass, ``stop``, or a wake-up (which ends every rest)."""
        woken = asyncio.ensure_future(self.context.wakeup.wait(self.priority, within))
        await first_of(woken, stop.wait())
        if woken.done() and not woken.cancelled() and woken.result():
            self._resting.clear()

    async def _claim(self, limit: int, channels: frozenset[str]) -> list[ClaimedDelivery]:
        """Up to ``limit`` due deliveries of ``channels`` (every channel: no filter)."""
        if limit <= 0:
            return []
        wanted = None if channels >= ALL_CHANNELS else channels
        now = utcnow()
        lease_until = now + timedelta(seconds=self.context.lease_seconds)
        try:
            await self.context.types.refresh_if_stale()
            await self.context.sender.composer.templates.refresh_if_stale()
            claimed = await claim_due(
                self.context.db, self.priority, limit, now, lease_until, wanted
            )
        except Exception:
            log.exception(
                "%s lane: claim failed; retrying after the poll interval", self.priority.value
            )
            await asyncio.sleep(self.settings.poll_interval)
            return []
        self.progress.claimed(len(claimed))
        return claimed

    async def drain(self, grace: float) -> None:
        await self.pipeline.drain(grace)
