"""The dispatcher's claims: take due deliveries, reap expired leases (outcomes: outcomes.py).

The claim is one atomic statement per dialect (docs/architecture.md, Claims, leases, fences
and the reaper), side by side below: it moves due PENDING rows to SENDING, sets a lease and
counts the attempt. A claimed row is read by column name, never by position: the columns
are listed once (``CLAIM_COLUMNS``), and the RETURNING clause and ``ClaimedDelivery`` follow.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from tidings.ids import new_id
from tidings.priorities import Priority
from tidings.states import Status
from tidings.store.engine import Database
from tidings.store.schema import delivery, delivery_event, notification


@dataclass(slots=True, kw_only=True)  # one per delivery sent: no frozen overhead
class ClaimedDelivery:
    id: uuid.UUID
    notification_id: uuid.UUID
    channel: str
    address: str
    priority: str
    category: str
    attempts: int
    created_at: datetime
    type: str
    data: dict[str, Any]
    locale: str | None
    user_id: str | None
    campaign_id: uuid.UUID | None = None
    send_at: datetime | None = None  # the notification's, when it was scheduled
    # The message id of an earlier send the provider later gave up on (a callback failed
    # it, then a replay): tells a stale dedup key from a send whose outcome was lost.
    provider_msg_id: str | None = None
    # The notification's email details (replyTo, cc, bcc), as the API took them.
    email: dict[str, Any] | None = None


_DELIVERY_COLUMNS = (
    delivery.c.id,
    delivery.c.notification_id,
    delivery.c.channel,
    delivery.c.address,
    delivery.c.priority,
    delivery.c.category,
    delivery.c.attempts,
    delivery.c.created_at,
    delivery.c.campaign_id,
    delivery.c.provider_msg_id,
)
_NOTIFICATION_COLUMNS = (
    notification.c.type,
    notification.c.data,
    notification.c.locale,
    notification.c.user_id,
    notification.c.send_at,
    notification.c.email,
)
# Every column a claim returns, by the name of its ClaimedDelivery field.
CLAIM_COLUMNS = tuple(c.name for c in (*_DELIVERY_COLUMNS, *_NOTIFICATION_COLUMNS))
assert set(CLAIM_COLUMNS) == {f.name for f in fields(ClaimedDelivery)}, "claim columns"


def claimed_from_row(row: Mapping[str, Any]) -> ClaimedDelivery:
    return ClaimedDelivery(**{name: row[name] for name in CLAIM_COLUMNS})


def _due(
    priority: Priority, now: datetime, limit: int, channels: list[str] | None
) -> sa.Select[Any]:
    query = sa.select(delivery.c.id).where(
        delivery.c.status == Status.PENDING.value,
        delivery.c.priority == priority.value,
        delivery.c.next_attempt_at <= now,
    )
    if channels is not None:
        query = query.where(delivery.c.channel.in_(channels))
    return query.order_by(delivery.c.next_attempt_at).limit(limit)


def _claim_values(now: datetime, lease_until: datetime) -> dict[str, Any]:
    return {
        "status": Status.SENDING.value,
        "attempts": delivery.c.attempts + 1,
        "lease_until": lease_until,
        "updated_at": now,
    }


async def claim_due(
    db: Database,
    priority: Priority,
    limit: int,
    now: datetime,
    lease_until: datetime,
    channels: Collection[str] | None = None,
) -> list[ClaimedDelivery]:
    """Atomically take up to ``limit`` due deliveries of one priority (of ``channels``
    only, when given)."""
    if limit <= 0:
        return []
    wanted = sorted(channels) if channels is not None else None
    if db.is_postgres:
        return await _claim_postgres(db, priority, limit, now, lease_until, wanted)
    return await _claim_sqlite(db, priority, limit, now, lease_until, wanted)


# Concurrent dispatchers skip each other's locked rows. Plain SQL through asyncpg: this runs
# for every delivery, and asyncpg prepares it once per connection.
_PG_CLAIM = """
WITH due AS (
    SELECT id FROM delivery
    WHERE status = 'PENDING' AND priority = $1 AND next_attempt_at <= $2 {channels}
    ORDER BY next_attempt_at
    LIMIT $3
    FOR UPDATE SKIP LOCKED
)
UPDATE delivery AS d
SET status = 'SENDING', attempts = d.attempts + 1, lease_until = $4, updated_at = $2
FROM due, notification AS n
WHERE d.id = due.id AND n.id = d.notification_id
RETURNING {returning}
"""
CLAIM_RETURNING = ", ".join(
    [f"d.{c.name}" for c in _DELIVERY_COLUMNS] + [f"n.{c.name}" for c in _NOTIFICATION_COLUMNS]
)
_PG_CLAIM_ANY = _PG_CLAIM.format(channels="", returning=CLAIM_RETURNING)
# A lane sizes a claim per rate-limited channel (dispatch/protection.claim_budgets).
_PG_CLAIM_CHANNELS = _PG_CLAIM.format(
    channels="AND channel = ANY($5::text[])", returning=CLAIM_RETURNING
)


async def _claim_postgres(
    db: Database,
    priority: Priority,
    limit: int,
    now: datetime,
    lease_until: datetime,
    channels: list[str] | None,
) -> list[ClaimedDelivery]:
    args: list[Any] = [priority.value, now, limit, lease_until]
    statement = _PG_CLAIM_ANY if channels is None else _PG_CLAIM_CHANNELS
    async with db.asyncpg() as conn:
        rows = await conn.fetch(statement, *args, *([] if channels is None else [channels]))
    return [claimed_from_row(row) for row in rows]


async def _claim_sqlite(
    db: Database,
    priority: Priority,
    limit: int,
    now: datetime,
    lease_until: datetime,
    channels: list[str] | None,
) -> list[ClaimedDelivery]:
    # UPDATE ... WHERE id IN (SELECT ...) RETURNING: SQLite has one writer at a time, so
    # the statement is atomic; RETURNING cannot name a joined table, hence the second query.
    statement = (
        sa.update(delivery)
        .where(delivery.c.id.in_(_due(priority, now, limit, channels).scalar_subquery()))
        .values(_claim_values(now, lease_until))
        .returning(*_DELIVERY_COLUMNS)
    )
    async with db.engine.begin() as conn:
        claimed = (await conn.execute(statement)).all()
        if not claimed:
            return []
        ids = {row.notification_id for row in claimed}
        found = await conn.execute(
            sa.select(notification.c.id.label("notification_id"), *_NOTIFICATION_COLUMNS).where(
                notification.c.id.in_(ids)
            )
        )
        parents = {row.notification_id: row._mapping for row in found}
    return [claimed_from_row({**row._mapping, **parents[row.notification_id]}) for row in claimed]


def event_row(
    delivery_id: uuid.UUID, kind: str, at: datetime, detail: dict[str, Any] | None
) -> dict[str, Any]:
    return {"id": new_id(), "delivery_id": delivery_id, "kind": kind, "at": at, "detail": detail}


async def reap_expired_leases(db: Database, now: datetime) -> int:
    """Return deliveries whose lease ran out to PENDING: SENDING ones of a crashed or stuck
    worker, and QUEUED ones whose ticket no worker took in time (a broker that lost its
    log). Both are due at once.

    A SENDING row's attempt stays counted, so a message that kills every worker still runs
    out of attempts and ends FAILED; a QUEUED row was never attempted.
    """
    async with db.engine.begin() as conn:
        events = []
        for status, kind in ((Status.SENDING, "lease_expired"), (Status.QUEUED, "queue_expired")):
            statement = (
                sa.update(delivery)
                .where(delivery.c.status == status.value, delivery.c.lease_until < now)
                .values(
                    status=Status.PENDING.value,
                    lease_until=None,
                    next_attempt_at=now,
                    updated_at=now,
                )
                .returning(delivery.c.id, delivery.c.attempts)
            )
            for row in await conn.execute(statement):
                events.append(event_row(row.id, kind, now, {"attempt": row.attempts}))
        if events:
            await conn.execute(sa.insert(delivery_event), events)
    return len(events)
