"""The hourly partition and retention pass that dispatchers run (docs/architecture.md,
Retention and partitions)."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import timedelta

from tidings.clock import utcnow
from tidings.store import inbox, partition_days
from tidings.store.engine import Database
from tidings.store.partitions import ensure_partitions, run_retention
from tidings.waiting import sleep_unless

log = logging.getLogger(__name__)

MAINTENANCE_INTERVAL = 3600.0


@dataclass(frozen=True)
class RetentionPlan:
    retention_days: int
    idempotency_days: int
    partitions_ahead: int
    inbox_days: int = 90
    interval: float = MAINTENANCE_INTERVAL


async def maintain_every(plan: RetentionPlan, db: Database, stop: asyncio.Event) -> None:
    """Every ``plan.interval`` until ``stop``: make the partitions ahead, apply the
    retention, then refresh the days the claims read. The first pass waits an interval:
    the process made its partitions as it started (runner.py), and a fleet started
    together need not all prune at once."""
    while not stop.is_set():
        await sleep_unless(stop, plan.interval)
        if stop.is_set():
            return
        try:
            now = utcnow()
            await ensure_partitions(db, now.date(), plan.partitions_ahead)
            done = await run_retention(db, now, plan.retention_days, plan.idempotency_days)
            inbox_deleted = await inbox.prune(db, now.date() - timedelta(days=plan.inbox_days))
            # The days made and dropped: the claims read the days that are there now.
            await partition_days.refresh(db, now.date())
        except Exception as error:
            log.warning("partition and retention pass failed (%s); trying again", error)
            continue
        if inbox_deleted:
            log.info("retention: %d inbox messages deleted", inbox_deleted)
        if done.dropped_days or done.notifications_deleted or done.keys_deleted or done.log.any:
            log.info(
                "retention: %d days dropped, %d notifications deleted, %d keys pruned, "
                "%d events and %d webhook messages deleted",
                len(done.dropped_days),
                done.notifications_deleted,
                done.keys_deleted,
                done.log.events,
                done.log.messages,
            )
