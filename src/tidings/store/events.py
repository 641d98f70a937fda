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
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from tidings.store.engine import Database
from tidings.store.schema import campaign, event, notification

VISIBLE = sa.text("event.txid < pg_snapshot_xmin(pg_current_snapshot())::text::bigint")


@dataclass(frozen=True)
class Cursor:
    txid: int
    id: int


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
    ]
)


async def page(
    db: Database, namespace: str, after: Cursor | None, types: Collection[str], limit: int
) -> list[Event]:
    """Up to ``limit`` events of ``namespace`` after ``after``, oldest first."""
    query = page_query(db, namespace, after, types, limit)
    async with db.engine.connect() as conn:
        rows = (await conn.execute(query)).all()
    return [_event(row._mapping) for row in rows]


def page_query(
    db: Database,
    namespace: str,
    after: Cursor | None,
    types: Collection[str],
    limit: int,
    notification_types: Collection[str] | None = None,
) -> sa.Select[Any]:
    """The query of ``page``; ``notification_types`` keeps events of those types only."""
    type_name = sa.func.coalesce(notification.c.type, campaign.c.type)
    query = (
        sa.select(event, sa.func.coalesce(notification.c.namespace, campaign.c.namespace))
        .outerjoin(notification, notification.c.id == event.c.notification_id)
        .outerjoin(
            campaign,
            sa.and_(campaign.c.id == event.c.campaign_id, event.c.notification_id.is_(None)),
        )
        .where(sa.func.coalesce(notification.c.namespace, campaign.c.namespace) == namespace)
        .limit(limit)
    )
    if types:
        query = query.where(event.c.type.in_(list(types)))
    if notification_types:
        query = query.where(type_name.in_(list(notification_types)))
    return in_order(db, query, after)


def in_order(db: Database, query: sa.Select[Any], after: Cursor | None) -> sa.Select[Any]:
    """``query`` over the event log: after ``after``, in the log's order, only what no
    running transaction can still precede (module docstring)."""
    if db.is_postgres:
        query = query.where(VISIBLE).order_by(event.c.txid, event.c.id)
        if after is not None:
            query = query.where(
                sa.tuple_(event.c.txid, event.c.id) > sa.tuple_(after.txid, after.id)
            )
        return query
    query = query.order_by(event.c.id)
    return query if after is None else query.where(event.c.id > after.id)


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
