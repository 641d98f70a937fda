"""The dispatcher's SQL: claim due deliveries, write outcomes back, reap expired leases.

The claim is one atomic statement per dialect (docs/architecture.md, Claims, leases, fences and the
reaper), side by side below: it moves
due PENDING rows to SENDING, sets a lease and counts the attempt. Outcomes are fenced by
(status SENDING, attempts): a worker whose lease expired and whose delivery was claimed
again cannot overwrite the newer attempt.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from tidings.ids import new_id
from tidings.priorities import Priority
from tidings.states import Status
from tidings.store.engine import Database
from tidings.store.schema import delivery, delivery_event, notification


@dataclass(slots=True)  # one per delivery sent: no frozen overhead
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


_DELIVERY_COLUMNS = (
    delivery.c.id,
    delivery.c.notification_id,
    delivery.c.channel,
    delivery.c.address,
    delivery.c.priority,
    delivery.c.category,
    delivery.c.attempts,
    delivery.c.created_at,
)
_NOTIFICATION_COLUMNS = (
    notification.c.type,
    notification.c.data,
    notification.c.locale,
    notification.c.user_id,
)


def _due(priority: Priority, now: datetime, limit: int) -> sa.Select[Any]:
    return (
        sa.select(delivery.c.id)
        .where(
            delivery.c.status == Status.PENDING.value,
            delivery.c.priority == priority.value,
            delivery.c.next_attempt_at <= now,
        )
        .order_by(delivery.c.next_attempt_at)
        .limit(limit)
    )


def _claim_values(now: datetime, lease_until: datetime) -> dict[str, Any]:
    return {
        "status": Status.SENDING.value,
        "attempts": delivery.c.attempts + 1,
        "lease_until": lease_until,
        "updated_at": now,
    }


async def claim_due(
    db: Database, priority: Priority, limit: int, now: datetime, lease_until: datetime
) -> list[ClaimedDelivery]:
    """Atomically take up to ``limit`` due deliveries of one priority."""
    if limit <= 0:
        return []
    if db.is_postgres:
        return await _claim_postgres(db, priority, limit, now, lease_until)
    return await _claim_sqlite(db, priority, limit, now, lease_until)


# Concurrent dispatchers skip each other's locked rows. Plain SQL through asyncpg: this runs
# for every delivery, and asyncpg prepares it once per connection.
_PG_CLAIM = """
WITH due AS (
    SELECT id FROM delivery
    WHERE status = 'PENDING' AND priority = $1 AND next_attempt_at <= $2
    ORDER BY next_attempt_at
    LIMIT $3
    FOR UPDATE SKIP LOCKED
)
UPDATE delivery AS d
SET status = 'SENDING', attempts = d.attempts + 1, lease_until = $4, updated_at = $2
FROM due, notification AS n
WHERE d.id = due.id AND n.id = d.notification_id
RETURNING d.id, d.notification_id, d.channel, d.address, d.priority, d.category, d.attempts,
          d.created_at, n.type, n.data, n.locale, n.user_id
"""


async def _claim_postgres(
    db: Database, priority: Priority, limit: int, now: datetime, lease_until: datetime
) -> list[ClaimedDelivery]:
    async with db.asyncpg() as conn:
        rows = await conn.fetch(_PG_CLAIM, priority.value, now, limit, lease_until)
    return [ClaimedDelivery(*row) for row in rows]


async def _claim_sqlite(
    db: Database, priority: Priority, limit: int, now: datetime, lease_until: datetime
) -> list[ClaimedDelivery]:
    # UPDATE ... WHERE id IN (SELECT ...) RETURNING: SQLite has one writer at a time, so
    # the statement is atomic; RETURNING cannot name a joined table, hence the second query.
    statement = (
        sa.update(delivery)
        .where(delivery.c.id.in_(_due(priority, now, limit).scalar_subquery()))
        .values(_claim_values(now, lease_until))
        .returning(*_DELIVERY_COLUMNS)
    )
    async with db.engine.begin() as conn:
        claimed = (await conn.execute(statement)).all()
        if not claimed:
            return []
        ids = {row.notification_id for row in claimed}
        found = await conn.execute(
            sa.select(notification.c.id, *_NOTIFICATION_COLUMNS).where(notification.c.id.in_(ids))
        )
        parents = {row.id: row for row in found}
    return [
        ClaimedDelivery(
            **row._asdict(),
            **{
                c.name: getattr(parents[row.notification_id], c.name) for c in _NOTIFICATION_COLUMNS
            },
        )
        for row in claimed
    ]


@dataclass(slots=True)  # one per delivery sent: no frozen overhead
class Outcome:
    """The result of one attempt, to be written back (in batches)."""

    delivery_id: uuid.UUID
    claimed_attempts: int  # the fencing token: the attempt this outcome belongs to
    status: Status
    attempts: int  # after this outcome (one less when the attempt is given back)
    next_attempt_at: datetime | None = None
    provider: str | None = None
    provider_msg_id: str | None = None
    last_error: str | None = None
    failure_kind: str | None = None
    skip_reason: str | None = None
    sent_at: datetime | None = None
    template_version: int | None = None  # None keeps the row's
    # A permanent error's consequence for the address: deactivate_device / suppress_address.
    effect: str | None = None
    effect_reason: str | None = None
    event: str | None = None  # a delivery_event kind, for what the row cannot hold
    event_detail: dict[str, Any] | None = None


_OUTCOME_FIELDS = (
    "status",
    "attempts",
    "next_attempt_at",
    "provider",
    "provider_msg_id",
    "last_error",
    "failure_kind",
    "skip_reason",
    "sent_at",
)

_write_outcome = (
    sa.update(delivery)
    .where(
        delivery.c.id == sa.bindparam("b_id"),
        delivery.c.status == Status.SENDING.value,
        delivery.c.attempts == sa.bindparam("b_claimed"),
    )
    .values(
        {name: sa.bindparam(f"b_{name}") for name in _OUTCOME_FIELDS}
        | {
            "lease_until": None,
            "updated_at": sa.bindparam("b_now"),
            "template_version": sa.func.coalesce(
                sa.bindparam("b_template_version", type_=sa.Integer),
                delivery.c.template_version,
            ),
        }
    )
)


# One row per statement, found by its key: a set-based UPDATE ... FROM unnest() looked
# better but let the planner, trusting statistics that saw no SENDING rows, pick a scan or
# a nested loop that made each batch quadratic. asyncpg pipelines the executemany.
_PG_WRITE_OUTCOME = """
UPDATE delivery
SET status = $3, attempts = $4, next_attempt_at = $5, provider = $6, provider_msg_id = $7,
    last_error = $8, failure_kind = $9, skip_reason = $10, sent_at = $11, lease_until = NULL,
    updated_at = $12, template_version = COALESCE($13::integer, template_version)
WHERE id = $1 AND status = 'SENDING' AND attempts = $2
"""
_PG_INSERT_EVENT = """
INSERT INTO delivery_event (id, delivery_id, kind, at, detail) VALUES ($1, $2, $3, $4, $5)
"""


async def write_outcomes(db: Database, outcomes: Sequence[Outcome], now: datetime) -> None:
    """Write a batch of outcomes in one transaction, with their events.

    An outcome whose fence fails (its lease expired and the delivery was claimed again)
    changes nothing and leaves no event: the history shows only what took effect.
    """
    if not outcomes:
        return
    if db.is_postgres:
        await _write_outcomes_postgres(db, outcomes, now)
        return
    async with db.engine.begin() as conn:
        quiet = [_outcome_params(o, now) for o in outcomes if not o.event]
        if quiet:
            await conn.execute(_write_outcome, quiet)
        events = []
        for outcome in (o for o in outcomes if o.event):  # the rarer path: failures
            result = await conn.execute(_write_outcome, _outcome_params(outcome, now))
            if result.rowcount == 1:
                events.append(_outcome_event(outcome, now))
        if events:
            await conn.execute(sa.insert(delivery_event), events)


async def _write_outcomes_postgres(
    db: Database, outcomes: Sequence[Outcome], now: datetime
) -> None:
    def row(outcome: Outcome) -> tuple[Any, ...]:
        return (
            outcome.delivery_id,
            outcome.claimed_attempts,
            *_outcome_values(outcome),
            now,
            outcome.template_version,
        )

    quiet = [row(o) for o in outcomes if not o.event]
    loud = [o for o in outcomes if o.event]
    async with db.asyncpg() as conn:
        # No transaction needed: after a failure the batch is written again, and rows already
        # written then fail their fence (no longer SENDING) and change nothing.
        if quiet:
            await conn.executemany(_PG_WRITE_OUTCOME, quiet)
        if not loud:
            return
        async with conn.transaction():
            events = [
                _outcome_event(o, now)
                for o in loud
                if await conn.fetchval(_PG_WRITE_OUTCOME + " RETURNING id", *row(o)) is not None
            ]
            if events:
                await conn.executemany(
                    _PG_INSERT_EVENT,
                    [
                        (e["id"], e["delivery_id"], e["kind"], e["at"], json.dumps(e["detail"]))
                        for e in events
                    ],
                )


def _outcome_event(outcome: Outcome, now: datetime) -> dict[str, Any]:
    assert outcome.event is not None
    return _event_row(outcome.delivery_id, outcome.event, now, outcome.event_detail)


def _outcome_values(outcome: Outcome) -> tuple[Any, ...]:
    """The values of ``_OUTCOME_FIELDS``, in that order."""
    return (
        outcome.status.value,
        outcome.attempts,
        outcome.next_attempt_at,
        outcome.provider,
        outcome.provider_msg_id,
        outcome.last_error,
        outcome.failure_kind,
        outcome.skip_reason,
        outcome.sent_at,
    )


def _outcome_params(outcome: Outcome, now: datetime) -> dict[str, Any]:
    values = zip(_OUTCOME_FIELDS, _outcome_values(outcome), strict=True)
    params = {f"b_{name}": value for name, value in values}
    params.update(
        b_id=outcome.delivery_id,
        b_claimed=outcome.claimed_attempts,
        b_now=now,
        b_template_version=outcome.template_version,
    )
    return params


def _event_row(
    delivery_id: uuid.UUID, kind: str, at: datetime, detail: dict[str, Any] | None
) -> dict[str, Any]:
    return {"id": new_id(), "delivery_id": delivery_id, "kind": kind, "at": at, "detail": detail}


async def reap_expired_leases(db: Database, now: datetime) -> int:
    """Return deliveries whose lease ran out (a crashed or stuck worker) to PENDING.

    The attempt stays counted, so a message that kills every worker still runs out of
    attempts and ends FAILED.
    """
    statement = (
        sa.update(delivery)
        .where(delivery.c.status == Status.SENDING.value, delivery.c.lease_until < now)
        .values(status=Status.PENDING.value, lease_until=None, next_attempt_at=now, updated_at=now)
        .returning(delivery.c.id, delivery.c.attempts)
    )
    async with db.engine.begin() as conn:
        reaped = (await conn.execute(statement)).all()
        if reaped:
            events = [
                _event_row(row.id, "lease_expired", now, {"attempt": row.attempts})
                for row in reaped
            ]
            await conn.execute(sa.insert(delivery_event), events)
    return len(reaped)
