"""The step runner: claims due steps (and steps whose lease ran out), runs each, and writes
its end under the fence, with the deliveries of a send in the same transaction. Time is
the database's. Run by every dispatcher beside its lanes (docs/workflows.md)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import datetime, timedelta

import sqlalchemy as sa

from tidings.priorities import Priority
from tidings.store.engine import Database
from tidings.store.workflow_digests import run_digest
from tidings.store.workflow_steps import (
    ClaimedStep,
    Completion,
    StepState,
    channel_reached,
    claim_due,
    complete,
    database_now,
)
from tidings.store.workflow_throttles import run_throttle
from tidings.waiting import sleep_unless
from tidings.workflows.durations import parse_duration
from tidings.workflows.shape import Send, Wait, parse_digest, parse_send, parse_throttle

log = logging.getLogger(__name__)

# Which history events answer an ``unless``: a click implies the open before it, and a
# read message was seen.
REACHED: dict[str, tuple[str, ...]] = {
    "delivered": ("delivered", "opened", "clicked", "read", "seen"),
    "opened": ("opened", "clicked", "read"),
    "clicked": ("clicked",),
    "read": ("read",),
    "seen": ("seen", "read"),
}
MAX_ATTEMPTS = 5  # a step that kills its runner every time ends FAILED, not in a loop


class StepRunner:
    def __init__(
        self,
        db: Database,
        wake: Callable[[Priority], None],
        *,
        poll_interval: float = 0.2,
        batch: int = 100,
        lease: timedelta = timedelta(seconds=60),
    ) -> None:
        self.db = db
        self.wake = wake
        self.poll_interval = poll_interval
        self.batch = batch
        self.lease = lease

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                ran = await self.round()
            except Exception as error:
                # The database away, mostly: the steps wait in their rows.
                log.warning("workflow steps: a round failed: %s", type(error).__name__)
                ran = 0
            if ran < self.batch:
                await sleep_unless(stop, self.poll_interval)

    async def round(self) -> int:
        """Claim and run one batch of due steps; how many were claimed."""
        now = await database_now(self.db)
        steps = await claim_due(self.db, now, now + self.lease, self.batch)
        for step in steps:
            try:
                await self._run(step, now)
            except Exception as error:
                # Its lease brings it back; its attempts count towards MAX_ATTEMPTS.
                log.warning(
                    "workflow step %s of notification %s failed: %s",
                    step.step_index,
                    step.notification_id,
                    type(error).__name__,
                )
        return len(steps)

    async def _run(self, step: ClaimedStep, now: datetime) -> None:
        if step.kind == "digest" and step.attempts <= MAX_ATTEMPTS:
            await self._digest(step, now)
            return
        if step.kind == "throttle" and step.attempts <= MAX_ATTEMPTS:
            throttle = parse_throttle(step.spec)
            await run_throttle(self.db, step, throttle.limit, throttle.window, now)
            return
        done = await self._decide(step, now)
        if await complete(self.db, step, done, now) and done.insert_deliveries:
            self.wake(Priority(step.priority))

    async def _decide(self, step: ClaimedStep, now: datetime) -> Completion:
        if step.attempts > MAX_ATTEMPTS:
            return Completion(StepState.FAILED, "exhausted", ends=True)
        if step.kind == "wait":
            wait = Wait(parse_duration(step.spec["wait"]))
            return Completion(StepState.DONE, next_due=now + wait.duration)
        if step.kind == "send":
            return await self._send(step, parse_send(step.spec))
        # A row of a later version of tidings, say.
        return Completion(StepState.FAILED, "unknown_step", ends=True)

    async def _digest(self, step: ClaimedStep, now: datetime) -> None:
        spec = parse_digest(step.spec)
        for _ in range(3):
            try:
                ran = await run_digest(self.db, step, spec.window, spec.max, now)
            except sa.exc.IntegrityError:
                continue  # another runner opened the group's digest just now: join it
            if ran is not None and ran.action == "closed":
                log.info("digest %s closed with %d notifications", ran.digest_id, ran.count)
            return
        raise RuntimeError("could neither open nor join the group's digest")

    async def _send(self, step: ClaimedStep, send: Send) -> Completion:
        unless = send.unless
        if unless is not None and await channel_reached(
            self.db, step.notification_id, unless.channel, REACHED[unless.event]
        ):
            return Completion(StepState.SKIPPED, "engaged")
        return Completion(StepState.DONE, insert_deliveries=True)
