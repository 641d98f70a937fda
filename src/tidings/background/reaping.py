"""The reaper loop that dispatchers, workers and relays all run (docs/architecture.md,
Claims, leases, fences and the reaper)."""

from __future__ import annotations

import asyncio
import logging

from tidings.clock import utcnow
from tidings.priorities import Priority
from tidings.store.claims import reap_expired_leases
from tidings.store.engine import Database
from tidings.store.tracking import settle_early
from tidings.store.wakeup import Wakeup
from tidings.waiting import sleep_unless

log = logging.getLogger(__name__)


async def reap_every(interval: float, db: Database, wakeup: Wakeup, stop: asyncio.Event) -> None:
    """Every ``interval`` until ``stop``: return expired leases (SENDING and QUEUED) to
    PENDING and wake every lane, and apply the provider statuses that outran their send's
    outcome (store/tracking.settle_early); a failure is logged and tried again."""
    while not stop.is_set():
        try:
            reaped = await reap_expired_leases(db, utcnow())
            await settle_early(db, utcnow())
        except Exception as error:
            log.warning("reaper failed (%s); trying again", type(error).__name__)
            reaped = 0
        if reaped:
            log.warning("returned %d deliveries with expired leases to PENDING", reaped)
            for priority in Priority:
                wakeup.notify(priority)
        await sleep_unless(stop, interval)
