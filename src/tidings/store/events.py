"""Reading the event log (docs/events.md) in order, a page at a time.

PostgreSQL: the order is (place, event id), the place being the writing transaction's id,
taken at its first write rather than at its commit (for a delivery's event, no earlier than
its previous event's: store/event_triggers.py); so a page ends before the oldest
transaction still running (its events may yet appear with smaller places), and the cursor
is (place, event id). SQLite commits one writer at a time: the event id alone is commit
order.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.store.dialects import Variants
from tidings.store.engine import Database
from tidings.store.schema import campaign, event, notification

VISIBLE = sa.text("event.txid < pg_snapshot_xmin(pg_current_snapshot())::text::bigint")


@dataclass(frozen=True)
class Cursor:
    txid: int
    id: int


@dataclass(frozen=True)
class _LogOrder:
    """A dialect's order of the log (module docstring): its key's columns of a table (the log
    or a window of it), a cursor's values of that key, and which rows may be read yet."""

    key: Callable[[Any], tuple[Any, ...]]
    place: Callable[[Cursor], tuple[int, ...]]
    visible: sa.ColumnElement[bool] | sa.TextClause | None


_ORDER = Variants(
    postgres=_LogOrder(lambda c: (c.txid, c.id), lambda at: (at.txid, at.id), VISIBLE),
    sqlite=_LogOrder(lambda c: (c.id,), lambda at: (at.id,), None),
)


@dataclass(frozen=True)
class Event:
    cursor: Cursor
    type: str
    at: datetime
    notification_id: uuid.UUID | None
    delivery_id: uuid.UUID | None
    campaign_id: uuid.UUID | None
    data: dict[str, Any]


TYPES = frozenset(
    [
        *(
            f"delivery.{name}"
            for name in (
                "sent",
                "delivered",
                "bounced",
                "failed",
                "skipped",
                "expired",
                "cancelled",
                "opened",
                "clicked",
                "complained",
                "unsubscribed",
            )
        ),
        "campaign.done",
        "campaign.cancelled",
        "campaign.paused",
        "campaign.resumed",
        # A workflow's step ended (docs/workflows.md); a digest closed.
        "step.completed",
        "digest.closed",
        # A user saw or read an inbox message (store/inbox.py; docs/inbox.md).
        "inbox.seen",
        "inbox.read",
    ]
)


# How much of the log one page reads at most, matching or not: a reader asking for rare
# events (a `types` filter, a quiet namespace) advances its cursor by this much per page
# instead of scanning the whole log after it, again and again.
SCAN = 5_000
PAGE_SCANS = 20


@dataclass(frozen=True)
class Page:
    events: list[Event]
    # Where the next page starts: after the last event, or, when fewer than asked for
    # matched, after everything this page read. None: the log holds nothing after ``after``.
    next: Cursor | None
    # The log may hold more after ``next`` already (the page was full, or read SCAN rows):
    # ask again at once rather than after a pause.
    more: bool = False


async def page(
    db: Database, namespace: str, after: Cursor | None, types: Collection[str], limit: int
) -> Page:
    """Up to ``limit`` events of ``namespace`` after ``after``, oldest first; a page that
    finds none reads on, up to PAGE_SCANS windows, so that an empty page is rarely one
    with more behind it."""
    async with db.engine.connect() as conn:
        found = await read_page(conn, db, namespace, after, types, limit)
        for _ in range(PAGE_SCANS - 1):
            if found.events or not found.more:
                break
            found = await read_page(conn, db, namespace, found.next, types, limit)
    return found


async def read_page(
    conn: AsyncConnection,
    db: Database,
    namespace: str,
    after: Cursor | None,
    types: Collection[str],
    limit: int,
    notification_types: Collection[str] | None = None,
) -> Page:
    """``page`` on ``conn``; ``notification_types`` keeps events of those types only.

    Two statements, one snapshot each, and still one answer: the window's end is below
    every running transaction's place, and no transaction can write below its own place
    (store/event_triggers.py), so the window holds the same rows for the second statement."""
    end = (await conn.execute(_window_end(db, after))).first()
    if end is None:
        return Page([], None)
    upto = Cursor(end.txid or 0, end.id)
    query = _page_query(db, namespace, after, upto, types, limit, notification_types)
    found = read_rows((await conn.execute(query)).all())
    if len(found) == limit:
        return Page(found, found[-1].cursor, more=True)
    return Page(found, upto, more=end.rows == SCAN)


def _window_end(db: Database, after: Cursor | None) -> sa.Select[Any]:
    """The last place of the next SCAN rows of the log, with how many rows that is."""
    window = in_order(db, sa.select(event.c.txid, event.c.id), after).limit(SCAN).subquery()
    last = [column.desc() for column in _ORDER.of(db).key(window.c)]
    rows = sa.func.count().over().label("rows")
    return sa.select(window.c.txid, window.c.id, rows).order_by(*last).limit(1)


def _page_query(
    db: Database,
    namespace: str,
    after: Cursor | None,
    upto: Cursor,
    types: Collection[str],
    limit: int,
    notification_types: Collection[str] | None,
) -> sa.Select[Any]:
    type_name = sa.func.coalesce(notification.c.type, campaign.c.type)
    query = (
        sa.select(event, sa.func.coalesce(notification.c.namespace, campaign.c.namespace))
        .outerjoin(notification, notification.c.id == event.c.notification_id)
        .outerjoin(
            campaign,
            sa.and_(campaign.c.id == event.c.campaign_id, event.c.notification_id.is_(None)),
        )
        .where(sa.func.coalesce(notification.c.namespace, campaign.c.namespace) == namespace)
        .where(_at_most(db, upto))
        .limit(limit)
    )
    if types:
        query = query.where(event.c.type.in_(list(types)))
    if notification_types:
        query = query.where(type_name.in_(list(notification_types)))
    return in_order(db, query, after)


def _at_most(db: Database, upto: Cursor) -> sa.ColumnElement[bool]:
    order = _ORDER.of(db)
    condition: sa.ColumnElement[bool] = _key(order.key(event.c)) <= _key(order.place(upto))
    return condition


def _key(values: tuple[Any, ...]) -> Any:
    """A one-column key is that column (SQLite's), a longer one a row value."""
    return values[0] if len(values) == 1 else sa.tuple_(*values)


def in_order(db: Database, query: sa.Select[Any], after: Cursor | None) -> sa.Select[Any]:
    """``query`` over the event log: after ``after``, in the log's order, only what no
    running transaction can still precede (module docstring)."""
    order = _ORDER.of(db)
    if order.visible is not None:
        query = query.where(order.visible)
    query = query.order_by(*order.key(event.c))
    return (
        query if after is None else query.where(_key(order.key(event.c)) > _key(order.place(after)))
    )


def read_rows(rows: Sequence[Any]) -> list[Event]:
    return [_event(row._mapping) for row in rows]


def payload(found: Event) -> dict[str, Any]:
    """The event as producers get it, per Standard Webhooks: type, timestamp, data (with its
    notification's, delivery's and campaign's ids)."""
    ids = {
        "notificationId": found.notification_id and str(found.notification_id),
        "deliveryId": found.delivery_id and str(found.delivery_id),
        "campaignId": found.campaign_id and str(found.campaign_id),
    }
    data = {**{k: v for k, v in ids.items() if v}, **found.data}
    return {"type": found.type, "timestamp": found.at.isoformat(), "data": data}


def _event(row: Any) -> Event:
    return Event(
        Cursor(row["txid"] or 0, row["id"]),
        row["type"],
        row["at"],
        row["notification_id"],
        row["delivery_id"],
        row["campaign_id"],
        dict(row["data"] or {}),
    )
