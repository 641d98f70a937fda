"""Inserting accepted notifications and their deliveries, idempotently, in one transaction."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.priorities import Channel, Priority
from tidings.states import Status
from tidings.store.dialects import Variants
from tidings.store.engine import Database
from tidings.store.schema import delivery, idempotency_key, notification
from tidings.store.wakeup import notify_postgres
from tidings.store.workflow_steps import (
    WorkflowDraft,
    insert_steps_postgres,
    insert_steps_sqlite,
    step_rows,
)


@dataclass(slots=True)  # created per item on the hot path: no frozen overhead
class DeliveryDraft:
    id: uuid.UUID
    channel: str
    address: str
    status: Status = Status.PENDING
    skip_reason: str | None = None


@dataclass(slots=True)  # created per item on the hot path: no frozen overhead
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
    data_json: str = ""  # ``data`` serialised, when the caller has it already
    campaign_id: uuid.UUID | None = None
    # When its deliveries are first due, if not at ``send_at`` (a due spike spread out).
    due_at: datetime | None = None
    # Email details (replyTo, cc, bcc), camelCase as the API takes them.
    email: dict[str, Any] | None = None
    # The HTTP request that submitted it (X-Request-Id): the dispatcher's log lines carry it.
    request_id: str | None = None
    # Its type's steps (docs/workflows.md): then its deliveries are inserted by its send
    # steps when they run, not now.
    workflow: WorkflowDraft | None = None


@dataclass(slots=True)  # created per item on the hot path: no frozen overhead
class AcceptedDelivery:
    id: uuid.UUID
    channel: str
    status: str


@dataclass(slots=True)  # created per item on the hot path: no frozen overhead
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
    """Insert ``drafts`` (with their deliveries) in one transaction; one result per draft.

    A draft whose (namespace, idempotency key) exists already is answered from the stored
    notification: the same answer when the request hash matches, a conflict when not. Two
    concurrent requests with one key serialise on the unique index, so both see one row.
    """
    # Sorted by key so two batches sharing keys lock them in the same order (no deadlock).
    firsts = sorted(_first_per_key(drafts), key=lambda d: (d.namespace, d.idempotency_key))
    if not firsts:
        return []
    inserted = await _insert.of(db)(db, firsts, now)
    # Committed rows never change their key, hash or delivery ids: read them afterwards.
    existing = await _existing(db, [d for d in drafts if d.id not in inserted])
    return [_result(draft, inserted, existing) for draft in drafts]


async def _insert_sqlite(
    db: Database, drafts: Sequence[NotificationDraft], now: datetime
) -> set[uuid.UUID]:
    async with db.engine.begin() as conn:
        return await insert_sqlite(conn, drafts, now)


async def insert_sqlite(
    conn: AsyncConnection, drafts: Sequence[NotificationDraft], now: datetime
) -> set[uuid.UUID]:
    """Insert the drafts whose keys are new, inside the caller's transaction (SQLite): the
    keys first, then the notifications and deliveries of the keys that were inserted."""
    statement = sqlite.insert(idempotency_key).on_conflict_do_nothing(
        index_elements=["namespace", "idempotency_key"]
    )
    keys = [_key_row(draft, now) for draft in drafts]
    result = await conn.execute(statement.returning(idempotency_key.c.notification_id), keys)
    inserted = {row.notification_id for row in result}
    new = [d for d in drafts if d.id in inserted]
    if new:
        await conn.execute(sa.insert(notification), [_notification_row(d, now) for d in new])
    deliveries = _delivery_rows(new, now)
    if deliveries:
        await conn.execute(sa.insert(delivery), deliveries)
    await insert_steps_sqlite(conn, _step_rows(new, now))
    return inserted


def _unnest_insert(table: str, columns: dict[str, str], scalars: dict[str, str]) -> str:
    """``INSERT INTO table SELECT ... FROM unnest(<one array per column>)``: a whole batch in
    one statement and one Bind message. JSON travels as text and is cast on the way in;
    ``scalars`` are SQL for columns that are the same on every row (``$N`` after the arrays)."""
    arrays = ", ".join(
        f"${i}::{'text' if kind == 'jsonb' else kind}[]"
        for i, kind in enumerate(columns.values(), start=1)
    )
    values = [
        f"u.{name}::jsonb" if kind == "jsonb" else f"u.{name}" for name, kind in columns.items()
    ]
    names = ", ".join([*columns, *scalars])
    select = ", ".join([*values, *scalars.values()])
    source = f"unnest({arrays}) AS u({', '.join(columns)})"
    return f"INSERT INTO {table} ({names}) SELECT {select} FROM {source}"


# Per-row values travel as arrays; what every row shares is one parameter after them (now).
_PG_NOTIFICATION_COLUMNS = {
    "id": "uuid",
    "namespace": "text",
    "idempotency_key": "text",
    "request_hash": "text",
    "type": "text",
    "category": "text",
    "priority": "text",
    "user_id": "text",
    "data": "jsonb",
    "locale": "text",
    "send_at": "timestamptz",
    "campaign_id": "uuid",
    "email": "jsonb",
    "request_id": "text",
}
_PG_INSERT_NOTIFICATIONS = _unnest_insert(
    "notification",
    _PG_NOTIFICATION_COLUMNS,
    {"created_at": f"${len(_PG_NOTIFICATION_COLUMNS) + 1}::timestamptz"},
)
# The keys go first, into their own unpartitioned table (a unique index on the partitioned
# notification could not span its days): the rows returned are the winners.
_PG_KEY_COLUMNS = {
    "namespace": "text",
    "idempotency_key": "text",
    "notification_id": "uuid",
    "request_hash": "text",
}
_PG_INSERT_KEYS = (
    _unnest_insert("idempotency_key", _PG_KEY_COLUMNS, {"created_at": "$5::timestamptz"})
    + " ON CONFLICT (namespace, idempotency_key) DO NOTHING"
    + " RETURNING namespace, idempotency_key"
)
_PG_DELIVERY_COLUMNS = {
    "id": "uuid",
    "notification_id": "uuid",
    "channel": "text",
    "address": "text",
    "priority": "text",
    "category": "text",
    "status": "text",
    "next_attempt_at": "timestamptz",
    "skip_reason": "text",
    "campaign_id": "uuid",
}
_PG_INSERT_DELIVERIES = _unnest_insert(
    "delivery",
    _PG_DELIVERY_COLUMNS,
    {"attempts": "0", "created_at": "$11::timestamptz", "updated_at": "$11::timestamptz"},
)


def _columns(rows: Sequence[dict[str, Any]], names: dict[str, str]) -> list[list[Any]]:
    return [[row[name] for row in rows] for name in names]


async def _insert_postgres(
    db: Database, drafts: Sequence[NotificationDraft], now: datetime
) -> set[uuid.UUID]:
    async with db.asyncpg() as conn, conn.transaction():
        return await insert_postgres(conn, drafts, now)


async def insert_postgres(
    conn: Any, drafts: Sequence[NotificationDraft], now: datetime
) -> set[uuid.UUID]:
    """Insert the drafts whose keys are new, inside the caller's transaction on an asyncpg
    connection: one statement for the keys, one for the notifications of the keys inserted,
    one for their deliveries."""
    keys = [_key_row(draft, now) for draft in drafts]
    found = await conn.fetch(_PG_INSERT_KEYS, *_columns(keys, _PG_KEY_COLUMNS), now)
    new = list(drafts) if len(found) == len(drafts) else _by_key(drafts, found)
    rows = [_notification_row(draft, now) for draft in new]
    for row, draft in zip(rows, new, strict=True):
        row["data"] = draft.data_json or json.dumps(draft.data)
        row["email"] = None if draft.email is None else json.dumps(draft.email)
    if rows:
        await conn.execute(_PG_INSERT_NOTIFICATIONS, *_columns(rows, _PG_NOTIFICATION_COLUMNS), now)
    deliveries = _delivery_rows(new, now)
    if deliveries:
        await conn.execute(_PG_INSERT_DELIVERIES, *_columns(deliveries, _PG_DELIVERY_COLUMNS), now)
    await insert_steps_postgres(conn, _step_rows(new, now), now)
    if any(_wakes_high(draft, now) for draft in new):
        await notify_postgres(conn, Priority.HIGH)
    return {draft.id for draft in new}


_insert = Variants(postgres=_insert_postgres, sqlite=_insert_sqlite)


def _by_key(drafts: Sequence[NotificationDraft], found: Sequence[Any]) -> list[NotificationDraft]:
    """The drafts whose rows were inserted, matched by key (comparing asyncpg's UUIDs with the
    standard library's is slow)."""
    keys = {(row[0], row[1]) for row in found}
    return [draft for draft in drafts if (draft.namespace, draft.idempotency_key) in keys]


def _wakes_high(draft: NotificationDraft, now: datetime) -> bool:
    due = draft.due_at or draft.send_at
    return draft.priority is Priority.HIGH and (due is None or due <= now)


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


def _key_row(draft: NotificationDraft, now: datetime) -> dict[str, Any]:
    return {
        "namespace": draft.namespace,
        "idempotency_key": draft.idempotency_key,
        "notification_id": draft.id,
        "request_hash": draft.request_hash,
        "created_at": now,
    }


def _notification_row(draft: NotificationDraft, now: datetime) -> dict[str, Any]:
    return {
        "id": draft.id,
        "namespace": draft.namespace,
        "idempotency_key": draft.idempotency_key,
        "request_hash": draft.request_hash,
        "type": draft.type,
        "category": draft.category,
        "priority": draft.priority,
        "user_id": draft.user_id,
        "data": draft.data,
        "locale": draft.locale,
        "campaign_id": draft.campaign_id,
        "send_at": draft.send_at,
        "email": draft.email,
        "request_id": draft.request_id,
        "created_at": now,
    }


def _delivery_rows(drafts: Sequence[NotificationDraft], now: datetime) -> list[dict[str, Any]]:
    # A workflow's deliveries wait in its send steps.
    return [
        _delivery_row(draft, item, now)
        for draft in drafts
        if draft.workflow is None
        for item in draft.deliveries
    ]


def _step_rows(drafts: Sequence[NotificationDraft], now: datetime) -> list[dict[str, Any]]:
    return [
        row
        for draft in drafts
        if draft.workflow is not None
        for row in step_rows(
            draft.id,
            draft.namespace,
            draft.priority.value,
            draft.category,
            draft.workflow,
            draft.due_at or draft.send_at or now,
            now,
        )
    ]


def _delivery_row(draft: NotificationDraft, item: DeliveryDraft, now: datetime) -> dict[str, Any]:
    pending = item.status is Status.PENDING
    return {
        "id": item.id,
        "notification_id": draft.id,
        "channel": item.channel,
        "address": item.address,
        "priority": draft.priority,
        "category": draft.category,
        "status": item.status,
        "attempts": 0,
        "next_attempt_at": (draft.due_at or draft.send_at or now) if pending else None,
        "lease_until": None,
        "skip_reason": item.skip_reason,
        "campaign_id": draft.campaign_id,
        "created_at": now,
        "updated_at": now,
    }


@dataclass(frozen=True)
class _Stored:
    id: uuid.UUID
    request_hash: str
    deliveries: list[AcceptedDelivery]


async def _existing(
    db: Database, drafts: Sequence[NotificationDraft]
) -> dict[tuple[str, str], _Stored]:
    """The stored notifications (with deliveries) that the drafts' keys point to, found
    through the key table (a key pruned after ``idempotency_days`` is not found: new)."""
    if not drafts:
        return {}
    keys = {(d.namespace, d.idempotency_key) for d in drafts}
    query = sa.select(
        idempotency_key.c.notification_id.label("id"),
        idempotency_key.c.namespace,
        idempotency_key.c.idempotency_key,
        idempotency_key.c.request_hash,
    ).where(sa.tuple_(idempotency_key.c.namespace, idempotency_key.c.idempotency_key).in_(keys))
    async with db.engine.connect() as conn:
        found = (await conn.execute(query)).all()
        by_notification: dict[uuid.UUID, list[AcceptedDelivery]] = {row.id: [] for row in found}
        rows = await conn.execute(
            sa.select(
                delivery.c.id, delivery.c.notification_id, delivery.c.channel, delivery.c.status
            )
            .where(delivery.c.notification_id.in_(list(by_notification)))
            .order_by(delivery.c.id)
        )
        stored = rows.all()
    for row in stored:
        by_notification[row.notification_id].append(
            AcceptedDelivery(row.id, row.channel, row.status)
        )
    return {
        (row.namespace, row.idempotency_key): _Stored(
            row.id, row.request_hash, by_notification[row.id]
        )
        for row in found
    }


# Enum members as plain strings: answers carry them to a JSON serializer, which is several
# times slower on enums.
_PLAIN: dict[str, str] = {member: member.value for member in (*Status, *Channel)}


def _result(
    draft: NotificationDraft, inserted: set[uuid.UUID], existing: dict[tuple[str, str], _Stored]
) -> AcceptResult:
    if draft.id in inserted:
        # A workflow's deliveries are made by its send steps, later.
        items = [
            AcceptedDelivery(d.id, _PLAIN.get(d.channel, d.channel), _PLAIN[d.status])
            for d in draft.deliveries
            if draft.workflow is None
        ]
        return Accepted(draft.id, items)
    stored = existing[(draft.namespace, draft.idempotency_key)]
    if stored.request_hash != draft.request_hash:
        return KeyConflict(draft.idempotency_key, stored.id)
    return Accepted(stored.id, stored.deliveries, replayed=True)
