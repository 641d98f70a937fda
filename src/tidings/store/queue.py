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
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import datetime

from tidings.priorities import Priority
from tidings.store.claims import CLAIM_RETURNING, ClaimedDelivery, claimed_from_row
from tidings.store.engine import Database


@dataclass(frozen=True, slots=True)
class Due:
    """A delivery the relay publishes: its topic's channel and its partition key's user."""

    id: uuid.UUID
    channel: str
    user_id: str | None


# Publishes the tickets of ``due`` and returns once the broker has acknowledged them all.
Publish = Callable[[Sequence[Due], datetime], Awaitable[None]]

_DUE = """
SELECT d.id, d.channel, n.user_id
FROM delivery AS d JOIN notification AS n ON n.id = d.notification_id
WHERE d.status = 'PENDING' AND d.priority = $1 AND d.next_attempt_at <= $2 {channels}
ORDER BY d.next_attempt_at
LIMIT $3
FOR UPDATE OF d SKIP LOCKED
"""
_DUE_ANY = _DUE.format(channels="")
_DUE_CHANNELS = _DUE.format(channels="AND d.channel = ANY($4::text[])")
_MARK_QUEUED = """
UPDATE delivery SET status = 'QUEUED', lease_until = $2, updated_at = $3
WHERE id = ANY($1::uuid[])
"""


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
    nothing is marked and the rows stay PENDING."""
    if limit <= 0:
        return 0
    async with db.asyncpg() as conn, conn.transaction():
        if channels is None:
            rows = await conn.fetch(_DUE_ANY, priority.value, now, limit)
        else:
            rows = await conn.fetch(_DUE_CHANNELS, priority.value, now, limit, sorted(channels))
        if not rows:
            return 0
        await publish([Due(r["id"], r["channel"], r["user_id"]) for r in rows], queued_until)
        await conn.execute(_MARK_QUEUED, [r["id"] for r in rows], queued_until, now)
    return len(rows)


_LOCK_TICKETS = """
SELECT id FROM delivery WHERE id = ANY($1::uuid[]) ORDER BY id FOR UPDATE
"""
_CLAIM_QUEUED = f"""
UPDATE delivery AS d
SET status = 'SENDING', attempts = d.attempts + 1, lease_until = $3, updated_at = $2
FROM unnest($1::uuid[], $4::timestamptz[]) AS t(id, queued_until), notification AS n
WHERE d.id = t.id AND d.status = 'QUEUED' AND d.lease_until = t.queued_until
  AND n.id = d.notification_id
RETURNING {CLAIM_RETURNING}
"""


async def claim_queued(
    db: Database,
    tickets: Sequence[tuple[uuid.UUID, datetime]],
    now: datetime,
    lease_until: datetime,
) -> list[ClaimedDelivery]:
    """Claim the deliveries of ``tickets`` (delivery id, queue lease) that are still QUEUED
    under that lease: SENDING, the attempt counted, leased until ``lease_until``. The
    others are duplicates or stale, and are not returned."""
    if not tickets:
        return []
    ordered = sorted(set(tickets))  # one lock order for every worker: no deadlocks
    ids = [t[0] for t in ordered]
    async with db.asyncpg() as conn, conn.transaction():
        await conn.execute(_LOCK_TICKETS, ids)
        rows = await conn.fetch(_CLAIM_QUEUED, ids, now, lease_until, [t[1] for t in ordered])
    return [claimed_from_row(row) for row in rows]


_QUEUED_COUNTS = """
SELECT priority, channel, count(*) AS queued FROM delivery
WHERE status = 'QUEUED' GROUP BY priority, channel
"""


async def queued_counts(db: Database) -> dict[tuple[str, str], int]:
    """QUEUED deliveries per (priority, channel): what each topic holds."""
    async with db.asyncpg() as conn:
        rows = await conn.fetch(_QUEUED_COUNTS)
    return {(r["priority"], r["channel"]): int(r["queued"]) for r in rows}
