"""Outcomes are written back as a group commit: one write for every send that finished
while the write before it was under way (at once when the writer is idle).

The writer never dies and never drops an outcome: a batch that fails is tried again; if the
database answers but refuses a batch, its outcomes are written one by one, and one it
refuses on its own is replaced by a plain one it can hold (see ``_plain``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from tidings.clock import utcnow
from tidings.states import FailureKind, Status
from tidings.store.engine import Database
from tidings.store.outcomes import Outcome, reachable, write_outcomes
from tidings.waiting import first_of

log = logging.getLogger(__name__)

RETRY_PAUSE = 0.5  # seconds between tries while the database is away


class OutcomeWriter:
    def __init__(self, db: Database, flush_interval: float = 0.0, max_batch: int = 1000) -> None:
        self.db = db
        self.flush_interval = flush_interval
        self.max_batch = max_batch
        self._buffer: list[Outcome] = []
        self._ready = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        # Outcomes put and written so far: the buffer is written in order, so every outcome
        # put before ``mark()`` is in the database once ``written`` reaches it.
        self._put = 0
        self._written = 0
        self._progress = asyncio.Condition()

    def put(self, outcome: Outcome) -> None:
        self._put += 1
        self._buffer.append(outcome)
        self._idle.clear()
        self._ready.set()

    @property
    def pending(self) -> int:
        return len(self._buffer)

    async def run(self, stop: asyncio.Event) -> None:
        """Flush batches until ``stop`` is set and the buffer is empty."""
        while not (stop.is_set() and not self._buffer):
            if not self._buffer:
                self._idle.set()
                await first_of(self._ready.wait(), stop.wait())
                self._ready.clear()
                continue
            if self.flush_interval:
                await asyncio.sleep(self.flush_interval)  # let a batch gather
            else:
                # One loop step: the sends that finished in this step join the write.
                await asyncio.sleep(0)
            await self.flush()

    async def flush(self) -> None:
        """Write what is buffered; on a database error keep it and try again later.

        If the process dies with outcomes unwritten, their leases expire and the deliveries
        are attempted again: at-least-once, with the delivery id as the provider's dedup key.
        """
        while self._buffer:
            batch = self._buffer[: self.max_batch]
            if await self._write(batch) or await self._write_apart(batch):
                del self._buffer[: len(batch)]
                self._written += len(batch)
                async with self._progress:
                    self._progress.notify_all()
            else:
                await asyncio.sleep(RETRY_PAUSE)

    async def _write(self, batch: Sequence[Outcome]) -> bool:
        try:
            await write_outcomes(self.db, batch, utcnow())
        except Exception as error:
            # The engine keeps statement parameters (addresses, data) out of the error's text.
            log.warning("writing %d outcomes failed: %s", len(batch), _name(error))
            return False
        return True

    async def _write_apart(self, batch: Sequence[Outcome]) -> bool:
        """After a batch failed: if the database answers, it refused something in the batch,
        and trying the same batch again would fail forever. Write the outcomes one by one;
        one refused on its own is replaced by its plain form. False: the database is away."""
        if not await reachable(self.db):
            return False
        for outcome in batch:
            if await self._write([outcome]):
                continue
            log.error(
                "delivery %s: outcome refused; writing its plain form",
                outcome.delivery_id,
                extra={"delivery_id": outcome.delivery_id},
            )
            if not await self._write([_plain(outcome)]) and not await reachable(self.db):
                return False  # gone meanwhile: the batch is tried again (written rows are fenced)
        return True

    def mark(self) -> int:
        """A mark of what has been put so far (see ``written``)."""
        return self._put

    async def written(self, mark: int) -> None:
        """Return once every outcome put before ``mark`` was taken is written."""
        async with self._progress:
            await self._progress.wait_for(lambda: self._written >= mark)

    async def drained(self) -> None:
        await self._idle.wait()


def _plain(outcome: Outcome) -> Outcome:
    """What the database holds of any outcome: its status (SENT stays SENT, as the message
    went out; anything else ends FAILED as poison), without the text that was refused."""
    if outcome.status is Status.SENT:
        return Outcome(
            delivery_id=outcome.delivery_id,
            claimed_attempts=outcome.claimed_attempts,
            status=Status.SENT,
            attempts=outcome.attempts,
            sent_at=outcome.sent_at,
        )
    return Outcome(
        delivery_id=outcome.delivery_id,
        claimed_attempts=outcome.claimed_attempts,
        status=Status.FAILED,
        attempts=outcome.attempts,
        failure_kind=FailureKind.POISON,
        last_error="the outcome of this attempt could not be written",
        event="failed",
        event_detail={"failureKind": FailureKind.POISON.value},
    )


def _name(error: BaseException) -> str:
    return type(error).__name__
