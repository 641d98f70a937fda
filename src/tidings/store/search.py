"""Searching a namespace's notifications, newest first, a page at a time (GET
/v1/notifications): by user, type, campaign and time on ``notification``; by status,
channel and address on its deliveries.

Newest first is ``id`` descending: ids are UUID v7, so their order is their creation's, and
a time range is a range of ids (its first millisecond in the top 48 bits), which on day
partitions (store/partitions.py) names the days a search reads. The indexes that serve it
(migration 0030): ``ix_notification_user``, ``ix_notification_type``,
``ix_notification_campaign`` (each ending in ``id``, read backwards) and
``ix_delivery_address``; with no filter on the notification, its primary key backwards.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from tidings.store.dialects import Variants
from tidings.store.engine import Database
from tidings.store.schema import delivery, notification

_MS_SHIFT = 80  # a UUID v7's top 48 bits are its Unix millisecond
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def id_bound(moment: datetime) -> uuid.UUID:
    """The smallest UUID v7 made at ``moment`` or later (before 1970: the smallest id)."""
    millisecond = max(0, int((moment - _EPOCH).total_seconds() * 1000))
    return uuid.UUID(int=millisecond << _MS_SHIFT)


@dataclass(frozen=True)
class Search:
    """What a search asks for; None is "any". ``before`` is the cursor (the last id of the
    page before) and ``start``/``end`` the time range, ``end`` excluded."""

    namespace: str
    limit: int
    user_id: str | None = None
    type: str | None = None
    campaign_id: uuid.UUID | None = None
    status: str | None = None
    channel: str | None = None
    address: str | None = None
    start: datetime | None = None
    end: datetime | None = None
    before: uuid.UUID | None = None


@dataclass(frozen=True)
class FoundDelivery:
    """A delivery as a search lists it: its state, not its history."""

    id: uuid.UUID
    channel: str
    address: str
    status: str
    attempts: int
    failure_kind: str | None
    skip_reason: str | None
    provider: str | None
    sent_at: datetime | None
    updated_at: datetime


@dataclass(frozen=True)
class FoundNotification:
    id: uuid.UUID
    type: str
    category: str
    priority: str
    user_id: str | None
    campaign_id: uuid.UUID | None
    send_at: datetime | None
    created_at: datetime
    deliveries: list[FoundDelivery]


@dataclass(frozen=True)
class SearchPage:
    notifications: list[FoundNotification]
    more: bool  # another page follows the last of these


_DELIVERY_FIELDS = tuple(FoundDelivery.__dataclass_fields__)
_NOTIFICATION_FIELDS = tuple(n for n in FoundNotification.__dataclass_fields__ if n != "deliveries")


def _query(search: Search) -> sa.Select[tuple[object, ...]]:
    n = notification.c
    query = sa.select(*(n[name] for name in _NOTIFICATION_FIELDS)).where(
        n.namespace == search.namespace
    )
    if search.user_id is not None:
        query = query.where(n.user_id == search.user_id)
    if search.type is not None:
        query = query.where(n.type == search.type)
    if search.campaign_id is not None:
        query = query.where(n.campaign_id == search.campaign_id)
    if search.start is not None:
        query = query.where(n.id >= id_bound(search.start))
    if search.end is not None:
        query = query.where(n.id < id_bound(search.end))
    if search.before is not None:
        query = query.where(n.id < search.before)
    matching = _delivery_conditions(search)
    if matching:
        d = delivery.c
        query = query.where(sa.exists().where(d.notification_id == n.id, *matching))
    return query.order_by(n.id.desc()).limit(search.limit + 1)


def _delivery_conditions(search: Search) -> list[sa.ColumnElement[bool]]:
    d = delivery.c
    found: list[sa.ColumnElement[bool]] = []
    if search.status is not None:
        found.append(d.status == search.status)
    if search.channel is not None:
        found.append(d.channel == search.channel)
    if search.address is not None:
        found.append(d.address == search.address)
    return found


def _deliveries_sqlite(notification_ids: list[uuid.UUID]) -> sa.Executable:
    columns = (delivery.c.notification_id, *(delivery.c[f] for f in _DELIVERY_FIELDS))
    query = sa.select(*columns).where(delivery.c.notification_id.in_(notification_ids))
    return query.order_by(delivery.c.id)


# One text whatever the page (prepared once per connection), looked up one notification at
# a time: on day partitions each lookup reads its day's partition alone (pruned at run
# time; a delivery lives in its notification's day), where an IN list over the parent
# probed every day's index for every id, and planned every day at each call.
_PG_DELIVERIES = sa.text(
    f"""SELECT d.notification_id, {", ".join(f"d.{f}" for f in _DELIVERY_FIELDS)}
FROM unnest(CAST(:ids AS uuid[])) AS n(id)
CROSS JOIN LATERAL (SELECT * FROM delivery WHERE delivery.notification_id = n.id) AS d
ORDER BY d.id"""
)


def _deliveries_postgres(notification_ids: list[uuid.UUID]) -> sa.Executable:
    return _PG_DELIVERIES.bindparams(
        sa.bindparam("ids", notification_ids, type_=postgresql.ARRAY(sa.Uuid))
    )


_deliveries = Variants(postgres=_deliveries_postgres, sqlite=_deliveries_sqlite)


async def search_notifications(db: Database, search: Search) -> SearchPage:
    """The page of notifications ``search`` matches, newest first, each with all its
    deliveries (not only those matched), read from one snapshot."""
    async with db.engine.connect() as conn:
        conn = await db.dialect.snapshot(conn)
        rows = list(await conn.execute(_query(search)))
        more = len(rows) > search.limit
        rows = rows[: search.limit]
        by_notification: dict[uuid.UUID, list[FoundDelivery]] = {r.id: [] for r in rows}
        if rows:
            statement = _deliveries.of(db)(list(by_notification))
            for d in await conn.execute(statement):
                by_notification[d.notification_id].append(
                    FoundDelivery(**{name: d._mapping[name] for name in _DELIVERY_FIELDS})
                )
    found = [
        FoundNotification(
            **{name: r._mapping[name] for name in _NOTIFICATION_FIELDS},
            deliveries=by_notification[r.id],
        )
        for r in rows
    ]
    return SearchPage(found, more)
