"""Outcomes are buffered and written back in batches: one transaction for many sends."""

from __future__ import annotations

import asyncio
import logging

from tidings.clock import utcnow
from tidings.dispatch.waiting import first_of
from tidings.store.claims import Outcome, write_outcomes
from tidings.store.effects import apply_effects
from tidings.store.engine import Database

log = logging.getLogger(__name__)


class OutcomeWriter:
    def __init__(self, db: Database, flush_interval: float = 0.01, max_batch: int = 1000) -> None:
        self.db = db
        self.flush_interval = flush_interval
        self.max_batch = max_batch
        self._buffer: list[Outcome] = []
        self._ready = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()

    def put(self, outcome: Outcome) -> None:
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
            await asyncio.sleep(self.flush_interval)  # let a batch gather
            await self.flush()

    async def flush(self) -> None:
        """Write what is buffered; on a database error keep it and try again later.

        If the process dies with outcomes unwritten, their leases expire and the deliveries
        are attempted again: at-least-once, with the delivery id as the provider's dedup key.
        """
        while self._buffer:
            batch = self._buffer[: self.max_batch]
            try:
                now = utcnow()
                await write_outcomes(self.db, batch, now)
                await apply_effects(self.db, batch, now)
            except Exception:
                log.exception("writing %d outcomes failed; retrying", len(batch))
                await asyncio.sleep(0.5)
                continue
            del self._buffer[: len(batch)]

    async def drained(self) -> None:
        await self._idle.wait()
