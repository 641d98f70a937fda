"""Reading a notification back with its deliveries and their event history."""

from __future__ import annotations

import uuid
from typing import Any

import sqlalchemy as sa

from tidings.store.engine import Database
from tidings.store.schema import delivery, delivery_event, notification


async def get_notification(
    db: Database, notification_id: uuid.UUID, namespace: str
) -> dict[str, Any] | None:
    """The notification row (None if it is another namespace's), with ``deliveries`` each
    carrying its ``events``, read from one snapshot: an outcome committed between two of
    these reads must not show its event beside the row as it was before (a delivery
    SENDING with a "deferred" last event)."""
    async with db.engine.connect() as conn:
        if db.is_postgres:
            conn = await conn.execution_options(isolation_level="REPEATABLE READ")
        row = (
            await conn.execute(
                sa.select(notification).where(
                    notification.c.id == notification_id, notification.c.namespace == namespace
                )
            )
        ).first()
        if row is None:
            return None
        deliveries = [
            dict(d._mapping)
            for d in await conn.execute(
                sa.select(delivery)
                .where(delivery.c.notification_id == notification_id)
                .order_by(delivery.c.id)
            )
        ]
        events = await conn.execute(
            sa.select(delivery_event)
            .where(delivery_event.c.delivery_id.in_([d["id"] for d in deliveries]))
            .order_by(delivery_event.c.at, delivery_event.c.id)
        )
    by_delivery: dict[uuid.UUID, list[dict[str, Any]]] = {d["id"]: [] for d in deliveries}
    for event in events:
        by_delivery[event.delivery_id].append(dict(event._mapping))
    for item in deliveries:
        item["events"] = by_delivery[item["id"]]
    return {**dict(row._mapping), "deliveries": deliveries}


async def count_by_status(db: Database) -> dict[str, int]:
    query = sa.select(delivery.c.status, sa.func.count()).group_by(delivery.c.status)
    async with db.engine.connect() as conn:
        return {status: count for status, count in await conn.execute(query)}
