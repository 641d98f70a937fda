"""The dispatcher's claims: take due deliveries, reap expired leases (outcomes: outcomes.py).

The claim is one atomic statement per dialect (docs/architecture.md, Claims, leases, fences
and the reaper), side by side below: it moves due PENDING rows to SENDING, sets a lease and
counts the attempt. On day partitions it is one such statement per day's partition, oldest
day first, until the batch is full (store/partition_days.py). A claimed row is read by
column name, never by position: the columns are listed once (``CLAIM_COLUMNS``), and the
RETURNING clause and ``ClaimedDelivery`` follow.
"""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import UTC, date, datetime
from typing import Any

import asyncpg.exceptions
import sqlalchemy as sa

from tidings.ids import new_id
from tidings.priorities import Priority
from tidings.states import FailureKind, Status
from tidings.store.dialects import Variants
from tidings.store.engine import Database
from tidings.store.partition_days import day_tables
from tidings.store.partitions import partition_name
from tidings.store.row_locks import locked_in_id_order
from tidings.store.schema import delivery, delivery_event, notification

log = logging.getLogger(__name__)


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
    # The HTTP request that submitted the notification, for the log lines of its sends.
    request_id: str | None = None
    # WhatsApp: when the number last wrote to each account, filled by the send-time checks
    # (the 24-hour customer service window; not a column).
    inbound_at: dict[str, datetime] | None = None


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
    notification.c.request_id,
)
# Every column a claim returns, by the name of its ClaimedDelivery field.
CLAIM_COLUMNS = tuple(c.name for c in (*_DELIVERY_COLUMNS, *_NOTIFICATION_COLUMNS))
# (inbound_at is no column: the send-time checks fill it.)
_FILLED_LATER = {"inbound_at"}
assert set(CLAIM_COLUMNS) == {f.name for f in fields(ClaimedDelivery)} - _FILLED_LATER, "claims"


def claimed_from_row(row: Mapping[str, Any]) -> ClaimedDelivery:
    """A claimed row by its column names (the RETURNING clause's are the fields')."""
    return ClaimedDelivery(**dict(row))


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
    return await _claim.of(db)(db, priority, limit, now, lease_until, wanted)


# Concurrent dispatchers skip each other's locked rows. Plain SQL through asyncpg: this runs
# for every delivery, and asyncpg prepares it once per connection. On day partitions the
# statement names one day's tables (``_pg_claim_in``), so it locks those alone.
_PG_CLAIM = """
WITH due AS (
    SELECT id, notification_id FROM {delivery}
    WHERE status = 'PENDING' AND priority = $1 AND next_attempt_at <= $2 {channels}
    ORDER BY next_attempt_at
    LIMIT $3
    FOR UPDATE SKIP LOCKED
)
UPDATE {delivery} AS d
SET status = 'SENDING', attempts = d.attempts + 1, lease_until = $4, updated_at = $2
FROM due, {notification} AS n
WHERE d.id = due.id AND d.notification_id = due.notification_id
    AND n.id = due.notification_id
RETURNING {returning}
"""
CLAIM_RETURNING = ", ".join(
    [f"d.{c.name}" for c in _DELIVERY_COLUMNS] + [f"n.{c.name}" for c in _NOTIFICATION_COLUMNS]
)
# A lane sizes a claim per rate-limited channel (dispatch/protection.claim_budgets).
_CHANNELS = "AND channel = ANY($5::text[])"


@functools.lru_cache(maxsize=256)
def _pg_claim(delivery_table: str, notification_table: str, by_channel: bool) -> str:
    return _PG_CLAIM.format(
        delivery=delivery_table,
        notification=notification_table,
        channels=_CHANNELS if by_channel else "",
        returning=CLAIM_RETURNING,
    )


def _pg_claim_in(day: date | None, by_channel: bool) -> str:
    """The claim on ``day``'s partitions (a delivery's notification is in its day), or on
    the parents (None: plain tables)."""
    if day is None:
        return _pg_claim("delivery", "notification", by_channel)
    return _pg_claim(
        partition_name("delivery", day), partition_name("notification", day), by_channel
    )


async def _claim_postgres(
    db: Database,
    priority: Priority,
    limit: int,
    now: datetime,
    lease_until: datetime,
    channels: list[str] | None,
) -> list[ClaimedDelivery]:
    today = now.astimezone(UTC).date()
    tables = await day_tables(db, today)
    async with db.asyncpg() as conn:
        if not tables.partitioned:
            args = _claim_args(priority, limit, now, lease_until, channels)
            rows = await conn.fetch(_pg_claim_in(None, channels is not None), *args)
            return [claimed_from_row(row) for row in rows]
        days = await tables.claim_days(conn, today)
        return await claim_in_days(
            conn, days, priority, limit, now, lease_until, channels, tables.gone
        )


def _claim_args(
    priority: Priority,
    limit: int,
    now: datetime,
    lease_until: datetime,
    channels: list[str] | None,
) -> list[Any]:
    return [priority.value, now, limit, lease_until, *([] if channels is None else [channels])]


async def claim_in_days(
    conn: Any,
    days: Sequence[date],
    priority: Priority,
    limit: int,
    now: datetime,
    lease_until: datetime,
    channels: list[str] | None,
    gone: Callable[[date], None],
) -> list[ClaimedDelivery]:
    """On day partitions: claim from each of ``days``' partitions in turn (asyncpg
    ``conn``), until ``limit`` are claimed. Each statement locks one day's two tables and
    their indexes, whatever the number of days; a day no longer there is told to ``gone``."""
    claimed: list[ClaimedDelivery] = []
    for day in days:
        wanted = limit - len(claimed)
        if wanted <= 0:
            break
        args = _claim_args(priority, wanted, now, lease_until, channels)
        try:
            rows = await conn.fetch(_pg_claim_in(day, channels is not None), *args)
        except asyncpg.exceptions.UndefinedTableError:  # dropped by retention since the refresh
            gone(day)
            continue
        claimed += [claimed_from_row(row) for row in rows]
    return claimed


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


_claim = Variants(postgres=_claim_postgres, sqlite=_claim_sqlite)


def event_row(
    delivery_id: uuid.UUID, kind: str, at: datetime, detail: dict[str, Any] | None
) -> dict[str, Any]:
    return {"id": new_id(), "delivery_id": delivery_id, "kind": kind, "at": at, "detail": detail}


async def reap_expired_leases(db: Database, now: datetime) -> int:
    """Return deliveries whose lease ran out to PENDING: SENDING ones of a crashed or stuck
    worker, and QUEUED ones whose ticket no worker took in time (a broker that lost its
    log). Both are due at once. A SENDING row whose attempt had started its provider call on
    an at-most-once account (``send_started_at``) may have been sent: it ends FAILED
    ambiguous instead (the dead-letter queue), never sent again. The count of all three.

    A SENDING row's attempt stays counted, so a message that kills every worker still runs
    out of attempts and ends FAILED; a QUEUED row was never attempted.
    """
    async with db.engine.begin() as conn:
        events = [
            event_row(row.id, "failed", now, _ambiguous_detail(row.attempts, row.provider))
            for row in await conn.execute(_fail_started(db, now))
        ]
        if events:
            log.warning(
                "%d deliveries lost their lease during an at-most-once provider call: "
                "FAILED ambiguous, not sent again",
                len(events),
            )
        for status, kind in ((Status.SENDING, "lease_expired"), (Status.QUEUED, "queue_expired")):
            expired = (delivery.c.status == status.value, delivery.c.lease_until < now)
            statement = (
                sa.update(delivery)
                .where(delivery.c.id.in_(_reapable(db, *expired)), *expired)
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


AMBIGUOUS_AFTER_LEASE = (
    "lease expired during the provider call (its process stopped or stalled): "
    "perhaps sent, not sent again (on_ambiguous = fail)"
)


def _reapable(db: Database, *conditions: sa.ColumnElement[bool]) -> sa.Select[Any]:
    """The ids of the rows matching ``conditions`` that no one else holds, locked in id order
    (store/row_locks.py): the reaper never waits for a row, so never on a claim that waits
    on it; a row passed by is reaped at its next round."""
    query = sa.select(delivery.c.id).where(*conditions)
    return locked_in_id_order(db, query, skip_locked=True)


def _fail_started(db: Database, now: datetime) -> sa.Update:
    """Expired SENDING rows whose provider call had started: FAILED ambiguous. The start
    mark stays, saying when (a replay clears it)."""
    started = (
        delivery.c.status == Status.SENDING.value,
        delivery.c.lease_until < now,
        delivery.c.send_started_at.is_not(None),
    )
    return (
        sa.update(delivery)
        .where(delivery.c.id.in_(_reapable(db, *started)), *started)
        .values(
            status=Status.FAILED.value,
            failure_kind=FailureKind.AMBIGUOUS.value,
            last_error=AMBIGUOUS_AFTER_LEASE,
            lease_until=None,
            updated_at=now,
        )
        .returning(delivery.c.id, delivery.c.attempts, delivery.c.provider)
    )


def _ambiguous_detail(attempt: int, provider: str | None) -> dict[str, Any]:
    """As an ambiguous provider failure's ``failed`` event says it
    (dispatch/pipeline/attempt.py)."""
    return {
        "attempt": attempt,
        "error": AMBIGUOUS_AFTER_LEASE,
        "kind": FailureKind.AMBIGUOUS.value,
        "provider": provider,
        "perhapsSent": True,
        "reason": "lease_expired",
        "failureKind": FailureKind.AMBIGUOUS.value,
    }
