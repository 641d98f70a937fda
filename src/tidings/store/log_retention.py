"""Retention of what the event log leaves behind: old events, producer webhook messages
taken long ago, and the marks of deliveries already counted in a report's unique metrics.

Kept as long as notifications are (``retention_days``): an event, a message or a mark
outlives its notification by no more than a retention pass. Each goes in batches by its
time-ordered key (a short lock and bounded WAL per transaction), from the oldest."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, date, datetime, time

import sqlalchemy as sa

from tidings.ids import day_bound
from tidings.store.engine import Database
from tidings.store.producer_hooks import SENT
from tidings.store.schema import event, report_unique, webhook_message

BATCH = 5_000


@dataclass
class LogPruned:
    events: int = 0
    messages: int = 0
    marks: int = 0

    @property
    def any(self) -> bool:
        return bool(self.events or self.messages or self.marks)


async def prune_log(db: Database, cutoff: date, batch: int = BATCH) -> LogPruned:
    """Delete what the event log left from before the day ``cutoff`` (the retention's)."""
    before = datetime.combine(cutoff, time(), UTC)
    bound = day_bound(cutoff)  # message ids and delivery ids are UUID v7s
    return LogPruned(
        events=await delete_in_batches(db, _old_events(before, batch), batch),
        messages=await delete_in_batches(db, _taken_messages(bound, batch), batch),
        marks=await delete_in_batches(db, _old_marks(bound, batch), batch),
    )


def _old_events(before: datetime, batch: int) -> sa.Delete:
    # The oldest ids first, those among them older than the cutoff: ids grow with time, and
    # reading by id never scans the recent log for an old row that is not there.
    oldest = sa.select(event.c.id).order_by(event.c.id).limit(batch)
    return sa.delete(event).where(event.c.id.in_(oldest.scalar_subquery()), event.c.at < before)


def _taken_messages(bound: uuid.UUID, batch: int) -> sa.Delete:
    # Only those taken: one still PENDING or FAILED is waiting for its endpoint.
    taken = (
        sa.select(webhook_message.c.id)
        .where(webhook_message.c.id < bound, webhook_message.c.status == SENT)
        .order_by(webhook_message.c.id)
        .limit(batch)
    )
    return sa.delete(webhook_message).where(webhook_message.c.id.in_(taken.scalar_subquery()))


def _old_marks(bound: uuid.UUID, batch: int) -> sa.Delete:
    old = (
        sa.select(report_unique.c.delivery_id, report_unique.c.metric)
        .where(report_unique.c.delivery_id < bound)
        .order_by(report_unique.c.delivery_id)
        .limit(batch)
    )
    key = sa.tuple_(report_unique.c.delivery_id, report_unique.c.metric)
    return sa.delete(report_unique).where(key.in_(old.scalar_subquery()))


async def delete_in_batches(db: Database, statement: sa.Delete, batch: int) -> int:
    """Run ``statement`` (a delete of at most ``batch`` rows) one transaction at a time
    until it deletes fewer: short locks and bounded WAL. Returns the rows deleted."""
    total = 0
    while True:
        async with db.engine.begin() as conn:
            deleted = (await conn.execute(statement)).rowcount
        total += deleted
        if deleted < batch:
            return total
