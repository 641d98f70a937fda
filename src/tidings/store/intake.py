"""Inserting accepted notifications and their deliveries, idempotently, in one transaction."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.priorities import Priority
from tidings.states import Status
from tidings.store.engine import Database
from tidings.store.schema import delivery, notification

WAKEUP_CHANNEL = "tidings_wakeup"


@dataclass(frozen=True)
class DeliveryDraft:
    id: uuid.UUID
    channel: str
    address: str
    status: Status = Status.PENDING
    skip_reason: str | None = None


@dataclass(frozen=True)
class NotificationDraft:
    """A validated notification, ready to insert."""

    id: uuid.UUID
    namespace: str
    idempotency_key: str
    request_hash: str
    type: str
    category: str
    priority: Priority
    user_id: str | None
    data: dict[str, Any]
    locale: str | None
    send_at: datetime | None
    deliveries: list[DeliveryDraft] = field(default_factory=list)


@dataclass(frozen=True)
class AcceptedDelivery:
    id: uuid.UUID
    channel: str
    status: str


@dataclass(frozen=True)
class Accepted:
    notification_id: uuid.UUID
    deliveries: list[AcceptedDelivery]
    replayed: bool = False


@dataclass(frozen=True)
class KeyConflict:
    """The idempotency key was used before with a different request body."""

    idempotency_key: str
    notification_id: uuid.UUID


AcceptResult = Accepted | KeyConflict


async def accept(
    db: Database, drafts: Sequence[NotificationDraft], now: datetime
) -> list[AcceptResult]:
    """Insert ``drafts`` in one transaction; one result per draft, in order.

    A draft whose (namespace, idempotency key) exists already is answered from the stored
    notification: the same answer when the request hash matches, a conflict when not. Two
    concurrent requests with one key serialise on the unique index, so both see one row.
    """
    async with db.engine.begin() as conn:
        inserted = await _insert_notifications(conn, db, drafts, now)
        new = [draft for draft in drafts if draft.id in inserted]
        await _insert_deliveries(conn, new, now)
        existing = await _existing(conn, [d for d in drafts if d.id not in inserted])
        if db.is_postgres and any(_wakes_high(draft) for draft in new):
            await conn.execute(sa.select(sa.func.pg_notify(WAKEUP_CHANNEL, Priority.HIGH.value)))
    return [_result(draft, inserted, existing) for draft in drafts]


def _wakes_high(draft: NotificationDraft) -> bool:
    return draft.priority is Priority.HIGH and draft.send_at is None


def _insert_statement(db: Database) -> Any:
    dialect_insert = postgresql.insert if db.is_postgres else sqlite.insert
    return dialect_insert(notification).on_conflict_do_nothing(
        index_elements=["namespace", "idempotency_key"]
    )


async def _insert_notifications(
    conn: AsyncConnection, db: Database, drafts: Sequence[NotificationDraft], now: datetime
) -> set[uuid.UUID]:
    # Sorted by key so two batches sharing keys lock them in the same order (no deadlock).
    firsts = sorted(_first_per_key(drafts), key=lambda d: (d.namespace, d.idempotency_key))
    rows = [_notification_row(draft, now) for draft in firsts]
    if not rows:
        return set()
    result = await conn.execute(_insert_statement(db).returning(notification.c.id), rows)
    return {row.id for row in result}


def _first_per_key(drafts: Sequence[NotificationDraft]) -> list[NotificationDraft]:
    """Later drafts with a key already in this batch are answered from the first one."""
    seen: set[tuple[str, str]] = set()
    first = []
    for draft in drafts:
        key = (draft.namespace, draft.idempotency_key)
        if key not in seen:
            seen.add(key)
            first.append(draft)
    return first


def _notification_row(draft: NotificationDraft, now: datetime) -> dict[str, Any]:
    return {
        "id": draft.id,
        "namespace": draft.namespace,
        "idempotency_key": draft.idempotency_key,
        "request_hash": draft.request_hash,
        "type": draft.type,
        "category": draft.category,
        "priority": draft.priority.value,
        "user_id": draft.user_id,
        "data": draft.data,
        "locale": draft.locale,
        "campaign_id": None,
        "send_at": draft.send_at,
        "created_at": now,
    }


async def _insert_deliveries(
    conn: AsyncConnection, drafts: Sequence[NotificationDraft], now: datetime
) -> None:
    rows = [_delivery_row(draft, item, now) for draft in drafts for item in draft.deliveries]
    if rows:
        await conn.execute(sa.insert(delivery), rows)


def _delivery_row(draft: NotificationDraft, item: DeliveryDraft, now: datetime) -> dict[str, Any]:
    pending = item.status is Status.PENDING
    return {
        "id": item.id,
        "notification_id": draft.id,
        "channel": item.channel,
        "address": item.address,
        "priority": draft.priority.value,
        "category": draft.category,
        "status": item.status.value,
        "attempts": 0,
        "next_attempt_at": (draft.send_at or now) if pending else None,
        "lease_until": None,
        "skip_reason": item.skip_reason,
        "campaign_id": None,
        "created_at": now,
        "updated_at": now,
    }


@dataclass(frozen=True)
class _Stored:
    id: uuid.UUID
    request_hash: str
    deliveries: list[AcceptedDelivery]


async def _existing(
    conn: AsyncConnection, drafts: Sequence[NotificationDraft]
) -> dict[tuple[str, str], _Stored]:
    """The stored notifications (with deliveries) that the drafts' keys point to."""
    if not drafts:
        return {}
    keys = {(d.namespace, d.idempotency_key) for d in drafts}
    query = sa.select(
        notification.c.id,
        notification.c.namespace,
        notification.c.idempotency_key,
        notification.c.request_hash,
    ).where(sa.tuple_(notification.c.namespace, notification.c.idempotency_key).in_(keys))
    found = (await conn.execute(query)).all()
    by_notification: dict[uuid.UUID, list[AcceptedDelivery]] = {row.id: [] for row in found}
    if found:
        rows = await conn.execute(
            sa.select(
                delivery.c.id, delivery.c.notification_id, delivery.c.channel, delivery.c.status
            )
            .where(delivery.c.notification_id.in_(list(by_notification)))
            .order_by(delivery.c.id)
        )
        for row in rows:
            by_notification[row.notification_id].append(
                AcceptedDelivery(row.id, row.channel, row.status)
            )
    return {
        (row.namespace, row.idempotency_key): _Stored(
            row.id, row.request_hash, by_notification[row.id]
        )
        for row in found
    }


def _result(
    draft: NotificationDraft, inserted: set[uuid.UUID], existing: dict[tuple[str, str], _Stored]
) -> AcceptResult:
    if draft.id in inserted:
        items = [AcceptedDelivery(d.id, d.channel, d.status.value) for d in draft.deliveries]
        return Accepted(draft.id, items)
    stored = existing[(draft.namespace, draft.idempotency_key)]
    if stored.request_hash != draft.request_hash:
        return KeyConflict(draft.idempotency_key, stored.id)
    return Accepted(stored.id, stored.deliveries, replayed=True)
