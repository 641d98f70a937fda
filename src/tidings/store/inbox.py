"""The in-app feed's messages (docs/inbox.md): stored by the ``inbox`` channel's sends, read
a page at a time, newest first, and marked seen, read or archived by their user.

A message is kept whole (title, body, data), so that it outlives its delivery: the feed
keeps ``inbox.retention_days`` (90), the notifications ``retention_days`` (30). Seen and
read also land in the delivery's history (``delivery_event`` kinds ``seen`` and ``read``,
while the delivery is kept) and in the event log (``inbox.seen``, ``inbox.read``), in the
transaction that marks the message, so none is lost and none is written twice.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from typing import Any, Literal

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.ids import day_bound, new_id
from tidings.store.dialects import Variants
from tidings.store.engine import Database
from tidings.store.inbox_wakeup import notify_in
from tidings.store.log_retention import delete_in_batches
from tidings.store.schema import delivery, delivery_event, event, inbox_message

Status = Literal["all", "unread", "unseen", "archived"]
# A state change of one message: the column it sets or clears, and the history kind it
# writes when it sets it (seen and read only).
Change = Literal["seen", "read", "unread", "archive", "unarchive"]
_SETS: dict[Change, tuple[str, bool]] = {
    "seen": ("seen_at", True),
    "read": ("read_at", True),
    "unread": ("read_at", False),
    "archive": ("archived_at", True),
    "unarchive": ("archived_at", False),
}
BATCH = 5_000


@dataclass(frozen=True)
class NewMessage:
    """What a send of the ``inbox`` channel stores."""

    delivery_id: uuid.UUID
    notification_id: uuid.UUID
    user_id: str
    type: str
    category: str
    subject: str | None
    text: str
    data: dict[str, Any]


@dataclass(frozen=True)
class InboxMessage:
    id: uuid.UUID
    delivery_id: uuid.UUID
    notification_id: uuid.UUID
    user_id: str
    type: str
    category: str
    subject: str | None
    text: str
    data: dict[str, Any]
    created_at: datetime
    seen_at: datetime | None
    read_at: datetime | None
    archived_at: datetime | None


@dataclass(frozen=True)
class Counts:
    """Of the messages not archived: those never seen, never read, and all of them."""

    unseen: int
    unread: int
    total: int


@dataclass(frozen=True)
class Page:
    items: list[InboxMessage]
    next: uuid.UUID | None  # the cursor of the next page; None: this was the last


async def store(db: Database, message: NewMessage, now: datetime) -> InboxMessage | None:
    """Store ``message``; None when its delivery's message is stored already (a send
    repeated after a lost outcome stores nothing twice)."""
    row = {
        "id": new_id(),
        "delivery_id": message.delivery_id,
        "notification_id": message.notification_id,
        "user_id": message.user_id,
        "type": message.type,
        "category": message.category,
        "subject": message.subject,
        "text": message.text,
        "data": message.data,
        "created_at": now,
    }
    statement = (
        db.dialect.insert(inbox_message)
        .values(row)
        .on_conflict_do_nothing(index_elements=["delivery_id"])
        .returning(*inbox_message.c)
    )
    async with db.engine.begin() as conn:
        found = (await conn.execute(statement)).first()
        if found is not None:
            await notify_in(db, conn, {message.user_id})
    return None if found is None else _message(found)


async def page(
    db: Database, user_id: str, status: Status, limit: int, after: uuid.UUID | None
) -> Page:
    """Up to ``limit`` of the user's messages, newest first, after the cursor ``after``."""
    query = (
        sa.select(inbox_message)
        .where(inbox_message.c.user_id == user_id, _status(status))
        .order_by(inbox_message.c.id.desc())
        .limit(limit + 1)
    )
    if after is not None:
        query = query.where(inbox_message.c.id < after)
    async with db.engine.connect() as conn:
        rows = (await conn.execute(query)).all()
    items = [_message(row) for row in rows[:limit]]
    return Page(items, items[-1].id if len(rows) > limit else None)


async def newer(db: Database, user_id: str, than: uuid.UUID, limit: int) -> list[InboxMessage]:
    """The user's messages stored after ``than`` (not archived), oldest first: what a live
    stream has not sent yet."""
    query = (
        sa.select(inbox_message)
        .where(inbox_message.c.user_id == user_id, inbox_message.c.id > than)
        .where(inbox_message.c.archived_at.is_(None))
        .order_by(inbox_message.c.id)
        .limit(limit)
    )
    async with db.engine.connect() as conn:
        return [_message(row) for row in (await conn.execute(query)).all()]


async def newest_id(db: Database, user_id: str) -> uuid.UUID:
    """The id of the user's newest message (the smallest id when they have none)."""
    query = (
        sa.select(inbox_message.c.id)
        .where(inbox_message.c.user_id == user_id)
        .order_by(inbox_message.c.id.desc())
        .limit(1)
    )
    async with db.engine.connect() as conn:
        found = (await conn.execute(query)).scalar()
    return found if isinstance(found, uuid.UUID) else uuid.UUID(int=0)


def _status(status: Status) -> sa.ColumnElement[bool]:
    m = inbox_message.c
    if status == "archived":
        return m.archived_at.is_not(None)
    kept = m.archived_at.is_(None)
    if status == "unread":
        return sa.and_(kept, m.read_at.is_(None))
    if status == "unseen":
        return sa.and_(kept, m.seen_at.is_(None))
    return kept


async def counts(db: Database, user_id: str) -> Counts:
    m = inbox_message.c
    query = sa.select(
        sa.func.count().filter(m.seen_at.is_(None)),
        sa.func.count().filter(m.read_at.is_(None)),
        sa.func.count(),
    ).where(m.user_id == user_id, m.archived_at.is_(None))
    async with db.engine.connect() as conn:
        unseen, unread, total = (await conn.execute(query)).one()
    return Counts(unseen, unread, total)


async def get(db: Database, user_id: str, message_id: uuid.UUID) -> InboxMessage | None:
    query = sa.select(inbox_message).where(
        inbox_message.c.id == message_id, inbox_message.c.user_id == user_id
    )
    async with db.engine.connect() as conn:
        found = (await conn.execute(query)).first()
    return None if found is None else _message(found)


async def change(
    db: Database, user_id: str, message_ids: Sequence[uuid.UUID] | None, what: Change, now: datetime
) -> list[InboxMessage]:
    """Apply ``what`` to the user's messages ``message_ids`` (None: all of them not yet in
    that state); the messages it changed. Setting seen or read writes their history and
    events in the same transaction."""
    column, setting = _SETS[what]
    target = inbox_message.c[column]
    statement = (
        sa.update(inbox_message)
        .where(
            inbox_message.c.user_id == user_id,
            target.is_(None) if setting else target.is_not(None),
        )
        .values({column: now if setting else None})
        .returning(*inbox_message.c)
    )
    if message_ids is not None:
        statement = statement.where(inbox_message.c.id.in_(list(message_ids)))
    async with db.engine.begin() as conn:
        changed = [_message(row) for row in (await conn.execute(statement)).all()]
        if what in ("seen", "read"):
            for message in changed:
                await _record(db, conn, message, what, now)
        if changed:
            await notify_in(db, conn, {user_id})
    return changed


async def _record(
    db: Database, conn: AsyncConnection, message: InboxMessage, kind: str, now: datetime
) -> None:
    """The delivery's history (while the delivery is kept: on day partitions a dropped
    day has no table left to write in) and the event log."""
    detail = {"inboxMessageId": str(message.id), "userId": message.user_id}
    history = sa.insert(delivery_event).from_select(
        ["id", "delivery_id", "kind", "at", "detail"],
        sa.select(
            sa.literal(new_id(), sa.Uuid),
            delivery.c.id,
            sa.literal(kind),
            sa.literal(now, delivery_event.c.at.type),
            sa.literal(detail, delivery_event.c.detail.type),
        )
        .where(delivery.c.id == message.delivery_id)
        .limit(1),
    )
    await conn.execute(history)
    place = _PLACE.of(db)(message.delivery_id)
    await conn.execute(
        sa.insert(event).values(
            txid=place,
            type=f"inbox.{kind}",
            at=now,
            notification_id=message.notification_id,
            delivery_id=message.delivery_id,
            data={**detail, "type": message.type, "channel": "inbox"},
        )
    )


def _pg_place(delivery_id: uuid.UUID) -> Any:
    """No earlier than the delivery's previous event (store/event_triggers.py, version 2)."""
    previous = (
        sa.select(delivery.c.event_txid)
        .where(delivery.c.id == delivery_id)
        .limit(1)
        .scalar_subquery()
    )
    own: Any = sa.literal_column("pg_current_xact_id()::text::bigint")
    return sa.func.greatest(own, sa.func.coalesce(previous, 0))


def _no_place(_delivery_id: uuid.UUID) -> Any:
    return None  # SQLite: the event id is the order


_PLACE = Variants(postgres=_pg_place, sqlite=_no_place)


async def prune(db: Database, cutoff: date, batch: int = BATCH) -> int:
    """Delete the messages stored before the day ``cutoff``, oldest first, in batches."""
    before = datetime.combine(cutoff, time(), UTC)
    oldest = (
        sa.select(inbox_message.c.id)
        .where(inbox_message.c.id < day_bound(cutoff))
        .order_by(inbox_message.c.id)
        .limit(batch)
    )
    statement = sa.delete(inbox_message).where(
        inbox_message.c.id.in_(oldest.scalar_subquery()), inbox_message.c.created_at < before
    )
    return await delete_in_batches(db, statement, batch)


def _message(row: Any) -> InboxMessage:
    return InboxMessage(
        id=row.id,
        delivery_id=row.delivery_id,
        notification_id=row.notification_id,
        user_id=row.user_id,
        type=row.type,
        category=row.category,
        subject=row.subject,
        text=row.text,
        data=row.data,
        created_at=row.created_at,
        seen_at=row.seen_at,
        read_at=row.read_at,
        archived_at=row.archived_at,
    )
