"""Each lane's progress, and the watch that restarts a lane that stalls.

A lane counts what it does (tickets read, deliveries claimed, tokens asked, outcomes and
sends) into its ``LaneProgress``, which ``/metrics``, ``GET /v1/providers`` (through the
dispatcher's report) and ``/readyz`` show. ``LaneWatch`` runs the lane's loop as a
*session*: when the lane has work (``has_work``) and has moved nothing for
``stall_seconds``, it says so in the log, ends the session (cancelled if it does not end by
itself: a hung await) and starts a new one, which for a Kafka lane is a new consumer that
takes its partitions again, after forgetting the lane's token estimates. A session that ends by
itself is started again too, so no swallowed error can end a lane for good. At ``stop`` a
session still running after ``settle`` seconds is cancelled: shutdown is bounded.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from tidings import metrics
from tidings.waiting import first_of, sleep_unless

log = logging.getLogger(__name__)

# The longest a stalled lane waits between two restarts.
MAX_PATIENCE_SECONDS = 600.0
# The lanes of this process, for /readyz (a lane is listed while it runs).
LANES: set[LaneProgress] = set()


@dataclass(eq=False)
class LaneProgress:
    priority: str
    transport: str  # "direct" or "kafka"
    clock: Callable[[], float] = time.monotonic
    reads: int = 0
    claims: int = 0
    tokens_asked: int = 0
    outcomes: int = 0
    sends: int = 0
    restarts: int = 0
    # Kafka: the partitions the lane's consumer holds now (None: a direct lane).
    assigned: int | None = None
    # Kafka: the channels whose topics the lane reads (the workers' reports say who reads
    # what, and lanes share their partitions by them: transport/assignment.py).
    channels: tuple[str, ...] | None = None
    last_success_at: float | None = None  # wall time of the last send
    stalled_since: float | None = None  # wall time; None while the lane moves
    _moved: float = field(default=0.0, repr=False)

    def __post_init__(self) -> None:
        self._moved = self.clock()

    def read(self, count: int) -> None:
        """Tickets read from the lane's topics (a stale one counts: the lane moved)."""
        self.reads += count
        self._count("reads", count)

    def claimed(self, count: int) -> None:
        self.claims += count
        self._count("claims", count)

    def asked(self, count: int) -> None:
        """Deliveries that asked their account's limiter for a token."""
        self.tokens_asked += count
        self._count("tokens_asked", count)

    def outcome(self, sent: bool) -> None:
        self.outcomes += 1
        self._count("outcomes", 1)
        if sent:
            self.sends += 1
            self.last_success_at = time.time()
            self._count("sends", 1)
            metrics.lane_success(self.transport, self.priority, self.last_success_at)

    def idle(self) -> None:
        """Nothing to do: not a stall, and the stall clock starts again."""
        self._moved = self.clock()

    def idle_for(self) -> float:
        return self.clock() - self._moved

    def stalled(self) -> None:
        """Seen stalled: restarted now; the stall clock starts again for the new session."""
        self.restarts += 1
        self._count("restarts", 1)
        if self.stalled_since is None:
            self.stalled_since = time.time()
            metrics.lane_stalled(self.transport, self.priority, True)
        self._moved = self.clock()

    def _count(self, kind: str, count: int) -> None:
        if count <= 0:
            return
        self._moved = self.clock()
        metrics.lane_progress(self.transport, self.priority, kind, count)
        if self.stalled_since is not None and kind != "restarts":
            log.warning(
                "%s lane moves again after a stall of %.0f s",
                self.priority,
                time.time() - self.stalled_since,
            )
            self.stalled_since = None
            metrics.lane_stalled(self.transport, self.priority, False)

    def snapshot(self) -> dict[str, Any]:
        """For GET /v1/providers (the dispatcher's report) and /readyz."""
        return {
            "priority": self.priority,
            "transport": self.transport,
            "reads": self.reads,
            "claims": self.claims,
            "tokensAsked": self.tokens_asked,
            "outcomes": self.outcomes,
            "sends": self.sends,
            "restarts": self.restarts,
            "lastSuccessAt": self.last_success_at,
            "idleSeconds": round(self.idle_for(), 1),
            "stalledSince": self.stalled_since,
            "assignedPartitions": self.assigned,
            "channels": list(self.channels) if self.channels is not None else None,
        }


def stalled_lanes() -> list[dict[str, Any]]:
    """The lanes of this process that are stalled now."""
    return [lane.snapshot() for lane in LANES if lane.stalled_since is not None]


Session = Callable[[asyncio.Event], Awaitable[None]]


@dataclass
class LaneWatch:
    progress: LaneProgress
    stall_seconds: float
    has_work: Callable[[], Awaitable[bool]]
    # What a restart resets besides the session (token estimates, rests, hung sends).
    reset: Callable[[], Awaitable[None]]
    # How long a session may take to end after its end was asked before it is cancelled.
    settle: float
    # How long a restarted session gets before it may be restarted again (a new Kafka
    # consumer needs its group to rebalance); doubled at each restart that did not help.
    min_restart_seconds: float = 0.0
    retry_seconds: float = 1.0
    _patience: float = 0.0
    _end: asyncio.Event = field(default_factory=asyncio.Event)
    _restart_asked: bool = False

    async def supervise(self, session: Session, stop: asyncio.Event) -> None:
        """Run ``session`` until ``stop``, anew after a stall or an end of its own."""
        LANES.add(self.progress)
        watcher = asyncio.create_task(self._watch(stop))
        try:
            while not stop.is_set():
                self._end, self._restart_asked = asyncio.Event(), False
                ended_by_itself = await self._run(session, stop)
                if stop.is_set():
                    break
                if ended_by_itself:
                    log.error("%s lane: its loop ended; starting it again", self.progress.priority)
                    await sleep_unless(stop, self.retry_seconds)
                await self.reset()
        finally:
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)
            LANES.discard(self.progress)

    async def _run(self, session: Session, stop: asyncio.Event) -> bool:
        """One session; True when it ended without being asked to."""
        end = self._end
        task = asyncio.ensure_future(session(end))
        asked = asyncio.ensure_future(first_of(stop.wait(), end.wait()))
        try:
            await asyncio.wait([task, asked], return_when=asyncio.FIRST_COMPLETED)
            end.set()
            if not task.done():
                await asyncio.wait([task], timeout=self.settle)
            if not task.done():
                log.error(
                    "%s lane: its session did not end within %.0f s; cancelled",
                    self.progress.priority,
                    self.settle,
                )
                task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        finally:
            asked.cancel()
            await asyncio.gather(asked, return_exceptions=True)
        if not task.cancelled() and task.exception() is not None:
            error = task.exception()
            log.error("%s lane: session failed (%s)", self.progress.priority, type(error).__name__)
            return True
        return not stop.is_set() and not self._restart_asked

    async def _watch(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await sleep_unless(stop, max(0.05, self.stall_seconds / 4))
            restarted = self.progress.stalled_since is not None
            patience = self._patience if restarted else self.stall_seconds
            if stop.is_set() or self.progress.idle_for() < patience:
                continue
            try:
                due = await self.has_work()
            except Exception as error:
                # The database is away: the lane cannot move either; ask again later.
                log.info("%s lane: work not known (%s)", self.progress.priority, error)
                continue
            if not due:
                self.progress.idle()
                continue
            log.error(
                "%s lane (%s) stalled: work is due and nothing moved for %.0f s%s; restarting it",
                self.progress.priority,
                self.progress.transport,
                self.progress.idle_for(),
                " (it holds no partition)" if self.progress.assigned == 0 else "",
            )
            first = max(self.stall_seconds, self.min_restart_seconds)
            self._patience = min(MAX_PATIENCE_SECONDS, 2 * self._patience) if restarted else first
            self.progress.stalled()
            self._restart_asked = True
            self._end.set()
