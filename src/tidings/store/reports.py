"""Campaign and type reports (docs/events.md, Reports): counters folded from the event log.

``fold`` reads the events after the reports' cursor, adds them to the counters of their
campaign and of their notification type's day (per namespace), and moves the cursor, in
one transaction: each event is counted once, whichever dispatcher folds it. Unique opens
and clicks count a delivery's first one (``report_unique``). A report then reads a few
counter rows, never the deliveries.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import date
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.store.engine import Database
from tidings.store.events import Cursor, Event, in_order, read_rows
from tidings.store.schema import event, notification, report_counter, report_cursor, report_unique
from tidings.store.upsert import insert

CURSOR = "reports"
_SIMPLE = {
    "delivery.sent": "sent",
    "delivery.delivered": "delivered",
    "delivery.bounced": "bounced",
    "delivery.failed": "failed",
    "delivery.expired": "expired",
    "delivery.cancelled": "cancelled",
    "delivery.complained": "complained",
    "delivery.unsubscribed": "unsubscribed",
}


def campaign_scope(campaign_id: uuid.UUID) -> str:
    return f"campaign:{campaign_id}"


def type_scope(namespace: str, type_name: str, day: date) -> str:
    return f"type:{namespace}:{type_name}:{day.isoformat()}"


async def fold(db: Database, limit: int = 2000) -> int:
    """Count the next events into the reports; how many were folded."""
    cursor_query = sa.select(report_cursor).where(report_cursor.c.name == CURSOR)
    # Another dispatcher folding now: leave it to that one.
    cursor_query = db.dialect.locked(cursor_query, skip_locked=True)
    async with db.engine.begin() as conn:
        cursor = (await conn.execute(cursor_query)).first()
        if cursor is None:
            return 0
        found = await _next_events(conn, db, cursor.txid, cursor.event_id, limit)
        if not found:
            return 0
        notifications = await _notifications(conn, {e.notification_id for e in found})
        firsts = await _firsts(conn, db, found)
        counts = _counts(found, notifications, firsts)
        if counts:
            await _add(conn, db, counts)
        last = found[-1].cursor
        await conn.execute(
            sa.update(report_cursor)
            .where(report_cursor.c.name == CURSOR)
            .values(txid=last.txid, event_id=last.id)
        )
    return len(found)


async def _next_events(
    conn: AsyncConnection, db: Database, txid: int, event_id: int, limit: int
) -> list[Event]:
    query = sa.select(event).where(event.c.type.like("delivery.%")).limit(limit)
    query = in_order(db, query, Cursor(txid, event_id))
    return read_rows((await conn.execute(query)).all())


async def _notifications(conn: AsyncConnection, ids: set[uuid.UUID | None]) -> dict[uuid.UUID, Any]:
    wanted = [i for i in ids if i is not None]
    query = sa.select(notification.c.id, notification.c.namespace, notification.c.type).where(
        notification.c.id.in_(wanted)
    )
    return {row.id: row for row in await conn.execute(query)} if wanted else {}


def _unique_keys(found: Event) -> list[str]:
    """The unique metrics an event may be a delivery's first of."""
    if found.type == "delivery.opened":
        return ["opened"] if found.data.get("machine") else ["opened", "opened_human"]
    if found.type == "delivery.clicked":
        return ["clicked"]
    return []


async def _firsts(
    conn: AsyncConnection, db: Database, found: Sequence[Event]
) -> set[tuple[uuid.UUID, str]]:
    """The (delivery, unique metric) pairs counted for the first time now."""
    wanted = {(e.delivery_id, key) for e in found if e.delivery_id for key in _unique_keys(e)}
    if not wanted:
        return set()
    rows = [{"delivery_id": d, "metric": m} for d, m in wanted]
    statement = (
        insert(db, report_unique)
        .values(rows)
        .on_conflict_do_nothing()
        .returning(report_unique.c.delivery_id, report_unique.c.metric)
    )
    return {(row.delivery_id, row.metric) for row in await conn.execute(statement)}


def _counts(
    found: Iterable[Event], notifications: dict[uuid.UUID, Any], firsts: set[tuple[uuid.UUID, str]]
) -> Counter[tuple[str, str]]:
    counts: Counter[tuple[str, str]] = Counter()
    firsts = set(firsts)  # each first is one event's: the first of its delivery in the batch
    for item in found:
        origin = notifications.get(item.notification_id) if item.notification_id else None
        if origin is None:
            continue  # retention removed it before it was counted
        scopes = [type_scope(origin.namespace, origin.type, item.at.date())]
        if item.campaign_id is not None:
            scopes.append(campaign_scope(item.campaign_id))
        for metric in _metrics(item, firsts):
            for scope in scopes:
                counts[(scope, metric)] += 1
    return counts


def _metrics(item: Event, firsts: set[tuple[uuid.UUID, str]]) -> list[str]:
    if item.type in _SIMPLE:
        return [_SIMPLE[item.type]]
    if item.type == "delivery.skipped":
        return ["skipped", f"skipped:{item.data.get('skipReason') or 'unknown'}"]
    if item.type in ("delivery.opened", "delivery.clicked"):
        name = item.type.removeprefix("delivery.")
        found = [name]
        for key in _unique_keys(item):
            if item.delivery_id is not None and (item.delivery_id, key) in firsts:
                firsts.discard((item.delivery_id, key))
                found.append(f"{key}_unique")
        return found
    return []


async def _add(conn: AsyncConnection, db: Database, counts: Counter[tuple[str, str]]) -> None:
    rows = [{"scope": s, "metric": m, "value": n} for (s, m), n in sorted(counts.items())]
    statement = insert(db, report_counter).values(rows)
    statement = statement.on_conflict_do_update(
        index_elements=["scope", "metric"],
        set_={"value": report_counter.c.value + statement.excluded.value},
    )
    await conn.execute(statement)


async def counters(db: Database, scopes: Sequence[str]) -> dict[str, int]:
    """Each metric summed over ``scopes``."""
    if not scopes:
        return {}
    query = (
        sa.select(report_counter.c.metric, sa.func.sum(report_counter.c.value))
        .where(report_counter.c.scope.in_(list(scopes)))
        .group_by(report_counter.c.metric)
    )
    async with db.engine.connect() as conn:
        return {metric: int(total) for metric, total in await conn.execute(query)}


async def folded_through(db: Database) -> int:
    """The id of the last event folded (0: none yet)."""
    query = sa.select(report_cursor.c.event_id).where(report_cursor.c.name == CURSOR)
    async with db.engine.connect() as conn:
        return int((await conn.execute(query)).scalar() or 0)
