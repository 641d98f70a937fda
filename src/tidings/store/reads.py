"""Reading a notification back with its deliveries and their event history."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from tidings.store.engine import Database
from tidings.store.schema import delivery, delivery_event, notification


@dataclass(frozen=True)
class DeliveryEvent:
    """One entry of a delivery's history (``delivery_event``)."""

    kind: str
    at: datetime
    detail: dict[str, Any] | None


@dataclass(frozen=True)
class DeliveryRecord:
    """A delivery as it is read back, with its history."""

    id: uuid.UUID
    channel: str
    address: str
    status: str
    attempts: int
    next_attempt_at: datetime | None
    last_error: str | None
    failure_kind: str | None
    skip_reason: str | None
    provider: str | None
    provider_msg_id: str | None
    template_version: int | None
    created_at: datetime
    sent_at: datetime | None
    updated_at: datetime
    events: list[DeliveryEvent]


@dataclass(frozen=True)
class NotificationRecord:
    """A notification as it is read back, with its deliveries."""

    id: uuid.UUID
    idempotency_key: str
    type: str
    category: str
    priority: str
    user_id: str | None
    locale: str | None
    send_at: datetime | None
    created_at: datetime
    deliveries: list[DeliveryRecord]


_DELIVERY_FIELDS = tuple(name for name in DeliveryRecord.__dataclass_fields__ if name != "events")
_NOTIFICATION_FIELDS = tuple(
    name for name in NotificationRecord.__dataclass_fields__ if name != "deliveries"
)


async def get_notification(
    db: Database, notification_id: uuid.UUID, namespace: str
) -> NotificationRecord | None:
    """The notification (None if it is another namespace's), with its deliveries each
    carrying its events, read from one snapshot: an outcome committed between two of
    these reads must not show its event beside the row as it was before (a delivery
    SENDING with a "deferred" last event)."""
    async with db.engine.connect() as conn:
        conn = await db.dialect.snapshot(conn)
        row = (
            await conn.execute(
                sa.select(notification).where(
                    notification.c.id == notification_id, notification.c.namespace == namespace
                )
            )
        ).first()
        if row is None:
            return None
        deliveries = list(
            await conn.execute(
                sa.select(delivery)
                .where(delivery.c.notification_id == notification_id)
                .order_by(delivery.c.id)
            )
        )
        events = await conn.execute(
            sa.select(delivery_event)
            .where(delivery_event.c.delivery_id.in_([d.id for d in deliveries]))
            .order_by(delivery_event.c.at, delivery_event.c.id)
        )
    by_delivery: dict[uuid.UUID, list[DeliveryEvent]] = {d.id: [] for d in deliveries}
    for event in events:
        by_delivery[event.delivery_id].append(DeliveryEvent(event.kind, event.at, event.detail))
    return NotificationRecord(
        **{name: row._mapping[name] for name in _NOTIFICATION_FIELDS},
        deliveries=[
            DeliveryRecord(
                **{name: d._mapping[name] for name in _DELIVERY_FIELDS}, events=by_delivery[d.id]
            )
            for d in deliveries
        ],
    )


async def count_by_status(db: Database) -> dict[str, int]:
    query = sa.select(delivery.c.status, sa.func.count()).group_by(delivery.c.status)
    async with db.engine.connect() as conn:
        return {status: count for status, count in await conn.execute(query)}
