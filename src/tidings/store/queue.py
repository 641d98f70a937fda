"""The Kafka transport's statements (PostgreSQL only): the relay's outbox claim, the
workers' claim of published deliveries, and what each topic holds.

The relay takes due PENDING rows with ``FOR UPDATE SKIP LOCKED``, publishes their tickets
and marks them QUEUED under a queue lease, all inside one transaction: a relay that dies
before its commit leaves them PENDING (published again later; the first ticket finds no
QUEUED row and is dropped). A worker's claim moves QUEUED to SENDING only under the lease
its ticket names.

A ticket can reach a worker before its relay has committed: the broker acknowledged it,
and the relay's UPDATE to QUEUED is still on its way. The row is then still PENDING in any
snapshot the worker takes, and an UPDATE ``WHERE status = 'QUEUED'`` would pass it by
without waiting (PostgreSQL waits only for rows that match in its snapshot). So the claim
first locks the tickets' rows by id, which waits for the relay's transaction whatever the
row's status, and then updates them in a second statement, whose new snapshot (READ
COMMITTED) sees the relay's commit.

On day partitions both name one day's partitions (store/partition_days.py): any statement
on the partitioned parent would lock every day's tables and indexes.
"""

from __future__ import annotations

import functools
import itertools
import uuid
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

import asyncpg.exceptions

from tidings.priorities import Priority
from tidings.store.claims import CLAIM_RETURNING, ClaimedDelivery, claimed_from_row
from tidings.store.engine import Database
from tidings.store.partition_days import day_tables, delivery_day
from tidings.store.partitions import partition_name


@dataclass(frozen=True, slots=True)
class Due:
    """A delivery the relay publishes: its topic's channel and its partition key's user."""

    id: uuid.UUID
    channel: str
    user_id: str | None


@dataclass(frozen=True, slots=True)
class Count:
    """A topic's QUEUED rows at a count, and how many became QUEUED since the last one."""

    queued: int
    fresh: int


# Publishes the tickets of ``due`` and returns once the broker has acknowledged them all.
Publish = Callable[[Sequence[Due], datetime], Awaitable[None]]

_DUE = """
SELECT d.id, d.channel, n.user_id
FROM {delivery} AS d JOIN {notification} AS n ON n.id = d.notification_id
WHERE d.status = 'PENDING' AND d.priority = $1 AND d.next_attempt_at <= $2 {channels}
ORDER BY d.next_attempt_at
LIMIT $3
FOR UPDATE OF d SKIP LOCKED
"""
_MARK_QUEUED = """
UPDATE {delivery} SET status = 'QUEUED', lease_until = $2, updated_at = $3
WHERE id = ANY($1::uuid[])
"""


def _tables(day: date | None) -> dict[str, str]:
    """The tables a statement names: ``day``'s partitions, or the parents (None: plain
    tables, or a delivery id whose day is not certain, partition_days.delivery_day)."""
    if day is None:
        return {"delivery": "delivery", "notification": "notification"}
    return {table: partition_name(table, day) for table in ("delivery", "notification")}


@functools.lru_cache(maxsize=128)
def _due(day: date | None, by_channel: bool) -> str:
    channels = "AND d.channel = ANY($4::text[])" if by_channel else ""
    return _DUE.format(channels=channels, **_tables(day))


@functools.lru_cache(maxsize=64)
def _mark_queued(day: date | None) -> str:
    return _MARK_QUEUED.format(**_tables(day))


class _DayGone(Exception):
    """A day's partition was dropped since the days were read."""

    def __init__(self, day: date) -> None:
        super().__init__(day)
        self.day = day


async def relay_due(
    db: Database,
    priority: Priority,
    limit: int,
    now: datetime,
    queued_until: datetime,
    publish: Publish,
    channels: Collection[str] | None = None,
) -> int:
    """Publish up to ``limit`` due deliveries of ``priority`` (of ``channels`` only, when
    given) and mark them QUEUED until ``queued_until``; how many. If ``publish`` raises,
    nothing is marked and the rows stay PENDING. On day partitions the rows are taken from
    each day's partition by name, oldest day first, as the dispatcher's claim does."""
    if limit <= 0:
        return 0
    today = now.astimezone(UTC).date()
    tables = await day_tables(db, today)
    wanted = sorted(channels) if channels is not None else None
    async with db.asyncpg() as conn:
        days: list[date | None] = [None]
        if tables.partitioned:
            days = list(await tables.claim_days(conn, today))
        while True:
            try:
                return await _relay(conn, days, priority, limit, now, queued_until, publish, wanted)
            except _DayGone as gone:  # nothing was published: again without that day
                tables.gone(gone.day)
                days.remove(gone.day)


async def _relay(
    conn: Any,
    days: list[date | None],
    priority: Priority,
    limit: int,
    now: datetime,
    queued_until: datetime,
    publish: Publish,
    channels: list[str] | None,
) -> int:
    """One transaction: lock due rows day by day, publish them all, mark them QUEUED."""
    async with conn.transaction():
        taken: list[tuple[date | None, list[Any]]] = []
        total = 0
        for day in days:
            if total >= limit:
                break
            args = [priority.value, now, limit - total, *([] if channels is None else [channels])]
            try:
                rows = await conn.fetch(_due(day, channels is not None), *args)
            except asyncpg.exceptions.UndefinedTableError as error:
                if day is None:
                    raise
                raise _DayGone(day) from error
            if rows:
                taken.append((day, rows))
                total += len(rows)
        if not total:
            return 0
        due = [Due(r["id"], r["channel"], r["user_id"]) for _, rows in taken for r in rows]
        await publish(due, queued_until)
        for day, rows in taken:  # their tables are locked by now: none can be dropped
            await conn.execute(_mark_queued(day), [r["id"] for r in rows], queued_until, now)
    return total


_LOCK_TICKETS = """
SELECT id FROM {delivery} WHERE id = ANY($1::uuid[]) ORDER BY id FOR UPDATE
"""
_CLAIM_QUEUED = """
UPDATE {delivery} AS d
SET status = 'SENDING', attempts = d.attempts + 1, lease_until = $3, updated_at = $2
FROM unnest($1::uuid[], $4::timestamptz[]) AS t(id, queued_until), {notification} AS n
WHERE d.id = t.id AND d.status = 'QUEUED' AND d.lease_until = t.queued_until
  AND n.id = d.notification_id
RETURNING {returning}
"""


@functools.lru_cache(maxsize=64)
def _claim_statements(day: date | None) -> tuple[str, str]:
    """The lock and the claim of tickets whose deliveries are in ``day``'s partitions."""
    names = _tables(day)
    return (
        _LOCK_TICKETS.format(**names),
        _CLAIM_QUEUED.format(returning=CLAIM_RETURNING, **names),
    )


async def claim_queued(
    db: Database,
    tickets: Sequence[tuple[uuid.UUID, datetime]],
    now: datetime,
    lease_until: datetime,
) -> list[ClaimedDelivery]:
    """Claim the deliveries of ``tickets`` (delivery id, queue lease) that are still QUEUED
    under that lease: SENDING, the attempt counted, leased until ``lease_until``. The
    others are duplicates or stale, and are not returned. On day partitions the tickets of
    each day are claimed from its partition by name (a delivery id names its day,
    partition_days.delivery_day), one transaction per day."""
    if not tickets:
        return []
    ordered = sorted(set(tickets))  # one lock order for every worker: no deadlocks
    partitioned = (await day_tables(db, now.astimezone(UTC).date())).partitioned
    claimed: list[ClaimedDelivery] = []
    async with db.asyncpg() as conn:
        for day, run in _by_day(ordered, partitioned):
            lock, claim = _claim_statements(day)
            ids = [t[0] for t in run]
            try:
                async with conn.transaction():
                    await conn.execute(lock, ids)
                    rows = await conn.fetch(claim, ids, now, lease_until, [t[1] for t in run])
            except asyncpg.exceptions.UndefinedTableError:
                continue  # a day dropped: no delivery of it was live, its tickets are stale
            claimed += [claimed_from_row(row) for row in rows]
    return claimed


def _by_day(
    ordered: list[tuple[uuid.UUID, datetime]], partitioned: bool
) -> list[tuple[date | None, list[tuple[uuid.UUID, datetime]]]]:
    """``ordered`` in runs of one day each (one run on plain tables), keeping the order:
    each transaction locks its rows in id order, and holds no other run's."""
    if not partitioned:
        return [(None, ordered)]
    runs = itertools.groupby(ordered, key=lambda ticket: delivery_day(ticket[0]))
    return [(day, list(run)) for day, run in runs]


_QUEUED_COUNTS = """
SELECT priority, channel, count(*) AS queued, count(*) FILTER (WHERE updated_at >= $1) AS fresh
FROM delivery WHERE status = 'QUEUED' GROUP BY priority, channel
"""


async def queued_counts(db: Database, since: datetime) -> dict[tuple[str, str], Count]:
    """QUEUED deliveries per (priority, channel): what each topic holds, and how many of
    them were published since ``since`` (the relay's pacing, transport/pacing.py)."""
    async with db.asyncpg() as conn:
        rows = await conn.fetch(_QUEUED_COUNTS, since)
    return {(r["priority"], r["channel"]): Count(int(r["queued"]), int(r["fresh"])) for r in rows}


_HAS_QUEUED = """
SELECT EXISTS (SELECT 1 FROM delivery WHERE status = 'QUEUED' AND priority = $1)
"""


async def has_queued(db: Database, priority: Priority) -> bool:
    """Whether ``priority`` has published deliveries no worker has taken (a Kafka lane
    has work: its stall watch, dispatch/lanes/progress.py)."""
    async with db.asyncpg() as conn:
        return bool(await conn.fetchval(_HAS_QUEUED, priority.value))
