"""The mass deactivation guard shared by the fleet, through the database (so with or
without Redis): each dispatcher writes its guard's trips and clears to the
``deactivation_guard`` table and follows the table's rows every ``GUARD_SYNC_SECONDS``
(dispatch/protection/deactivation_guard.py). An operator's reset is a clear the API writes there."""

from __future__ import annotations

import asyncio
import logging

from tidings.dispatch.protection.deactivation_guard import (
    Cleared,
    DeactivationGuard,
    Trip,
)
from tidings.store import deactivation_guard as rows
from tidings.store.engine import Database
from tidings.waiting import sleep_unless

log = logging.getLogger(__name__)

GUARD_SYNC_SECONDS = 1.0


class GuardSync:
    def __init__(self, db: Database, guard: DeactivationGuard, dispatcher: str) -> None:
        self.db = db
        self.guard = guard
        self.dispatcher = dispatcher
        self._outbox: list[Trip | Cleared] = []  # this process's changes not yet written

    async def sync(self) -> None:
        """Write this process's trips and clears (in order), then follow the fleet's."""
        self._outbox.extend(self.guard.changes())
        while self._outbox:
            await self._publish(self._outbox[0])
            del self._outbox[0]
        for record in await rows.records(self.db):
            self.guard.follow(record)

    async def _publish(self, change: Trip | Cleared) -> None:
        if isinstance(change, Cleared):
            await rows.record_clear(self.db, change.account, change.at, change.by)
            return
        await rows.record_trip(
            self.db,
            change.account,
            at=change.at,
            hold_until=change.hold_until,
            share=change.share,
            samples=change.samples,
            reason=change.reason,
            by=self.dispatcher,
        )

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await self.sync()
            except Exception as error:
                log.warning("sharing the deactivation guard failed (%s)", type(error).__name__)
            await sleep_unless(stop, GUARD_SYNC_SECONDS)
