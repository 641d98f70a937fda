"""The dead-letter queue: FAILED deliveries, listed and replayed (docs/architecture.md, Delivery
state machine)."""

from __future__ import annotations

import uuid
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from tidings.ids import new_id
from tidings.states import FailureKind, Status
from tidings.store.engine import Database
from tidings.store.schema import delivery, delivery_event, notification

# What the queue holds: failures that retrying later might fix, and ambiguous ones (perhaps
# sent: an operator decides). A permanent failure (an invalid address) can be replayed too,
# by id, but is not listed.
DEAD_KINDS = (FailureKind.EXHAUSTED.value, FailureKind.POISON.value, FailureKind.AMBIGUOUS.value)


@dataclass(frozen=True)
class DeadLetter:
    """A FAILED delivery as the queue lists it (``failed_at``: when it failed)."""

    id: uuid.UUID
    notification_id: uuid.UUID
    channel: str
    address: str
    failure_kind: str | None
    last_error: str | None
    attempts: int
    failed_at: datetime


@dataclass(frozen=True)
class DeadFilter:
    """Which dead letters: their kinds, and optionally their notification's type, a text
    in their last error, and when they failed (``since`` included, ``until`` excluded)."""

    kinds: Collection[str] = DEAD_KINDS
    type: str | None = None
    error: str | None = None
    since: datetime | None = None
    until: datetime | None = None


def _matching(namespace: str, found: DeadFilter) -> list[sa.ColumnElement[bool]]:
    conditions = [
        delivery.c.status == Status.FAILED.value,
        delivery.c.failure_kind.in_(list(found.kinds)),
        notification.c.namespace == namespace,
    ]
    if found.type is not None:
        conditions.append(notification.c.type == found.type)
    if found.error is not None:
        conditions.append(delivery.c.last_error.contains(found.error, autoescape=True))
    if found.since is not None:
        conditions.append(delivery.c.updated_at >= found.since)
    if found.until is not None:
        conditions.append(delivery.c.updated_at < found.until)
    return conditions


def _joined(*columns: Any) -> sa.Select[Any]:
    return sa.select(*columns).join(notification, notification.c.id == delivery.c.notification_id)


async def list_dead(
    db: Database,
    namespace: str,
    kinds: Collection[str] = DEAD_KINDS,
    limit: int = 100,
    found: DeadFilter | None = None,
) -> list[DeadLetter]:
    """The newest failed deliveries of those kinds (or matching ``found``), of
    notifications in ``namespace``."""
    found = found or DeadFilter(kinds)
    query = (
        _joined(delivery)
        .where(*_matching(namespace, found))
        .order_by(delivery.c.updated_at.desc())
        .limit(limit)
    )
    async with db.engine.connect() as conn:
        return [_dead_letter(row) for row in await conn.execute(query)]


async def count_dead(db: Database, namespace: str, found: DeadFilter) -> int:
    query = _joined(sa.func.count()).where(*_matching(namespace, found))
    async with db.engine.connect() as conn:
        return int((await conn.execute(query)).scalar_one())


def _dead_letter(row: Any) -> DeadLetter:
    return DeadLetter(
        id=row.id,
        notification_id=row.notification_id,
        channel=row.channel,
        address=row.address,
        failure_kind=row.failure_kind,
        last_error=row.last_error,
        attempts=row.attempts,
        failed_at=row.updated_at,
    )


async def replay(db: Database, delivery_id: uuid.UUID, namespace: str, now: datetime) -> str | None:
    """Send a FAILED delivery again, with fresh attempts; its priority, or None when it is
    not FAILED. The failure is kept in the ``replayed`` event. LookupError: no such delivery
    in ``namespace``."""
    statement = (
        sa.update(delivery)
        .where(delivery.c.id == delivery_id, delivery.c.status == Status.FAILED.value)
        .values(
            status=Status.PENDING.value,
            attempts=0,
            next_attempt_at=now,
            last_error=None,
            failure_kind=None,
            send_started_at=None,  # the new attempts start afresh (store/claims.py, reaper)
            updated_at=now,
        )
        .returning(delivery.c.priority)
    )
    before = (
        sa.select(delivery.c.failure_kind, delivery.c.last_error, delivery.c.attempts)
        .join(notification, notification.c.id == delivery.c.notification_id)
        .where(delivery.c.id == delivery_id, notification.c.namespace == namespace)
    )
    async with db.engine.begin() as conn:
        previous = (await conn.execute(before)).first()
        if previous is None:
            raise LookupError(delivery_id)
        row = (await conn.execute(statement)).first()
        if row is None:
            return None
        detail = {
            "failureKind": previous.failure_kind,
            "lastError": previous.last_error,
            "attempts": previous.attempts,
        }
        await conn.execute(
            sa.insert(delivery_event).values(
                id=new_id(), delivery_id=delivery_id, kind="replayed", at=now, detail=detail
            )
        )
    priority: str = row.priority
    return priority
