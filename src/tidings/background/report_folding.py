"""Keeping the reports' counters up to date (store/reports.py): the dispatchers fold the
event log into them, every ``interval`` seconds or at once while there is more."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from tidings.store import reports
from tidings.store.engine import Database

log = logging.getLogger(__name__)


class ReportFolder:
    def __init__(self, db: Database, interval: float = 1.0) -> None:
        self.db = db
        self.interval = interval

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                folded = await reports.fold(self.db)
            except Exception:
                # Counted later, from the same place: a failed round loses nothing.
                log.exception("reports: folding failed; trying again")
                folded = 0
            if not folded:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self.interval)
