"""Opens, clicks and unsubscribes tidings measures itself (docs/tracking.md): each one an
event in the delivery's history (``opened``, ``clicked``, ``unsubscribed``), summed when
the delivery is read and, through the event log, in reports."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from tidings.ids import new_id
from tidings.store.engine import Database
from tidings.store.reads import DeliveryEvent
from tidings.store.schema import delivery, delivery_event


@dataclass(frozen=True)
class EngagementSummary:
    """What one email delivery's history says of its opens and clicks."""

    opens: int
    human_opens: int
    clicks: int
    first_opened_at: datetime | None
    first_clicked_at: datetime | None


OPENED = "opened"
CLICKED = "clicked"
UNSUBSCRIBED = "unsubscribed"


async def record(
    db: Database, delivery_id: uuid.UUID, kind: str, detail: dict[str, Any], now: datetime
) -> bool:
    """Add the event; False when the delivery is not there (removed by retention)."""
    async with db.engine.begin() as conn:
        result = await conn.execute(_insert(delivery_id, kind, detail, now))
    return bool(result.rowcount)


async def record_once(
    db: Database, delivery_id: uuid.UUID, kind: str, detail: dict[str, Any], now: datetime
) -> bool:
    """Add the event unless the delivery has one of that kind already (an unsubscribe link
    used twice is one unsubscribe); False when not added."""
    seen = sa.select(delivery_event.c.id).where(
        delivery_event.c.delivery_id == delivery_id, delivery_event.c.kind == kind
    )
    async with db.engine.begin() as conn:
        # Two at once: the second waits for the first's commit, then sees its event.
        lock = sa.select(delivery.c.id).where(delivery.c.id == delivery_id)
        await conn.execute(db.dialect.locked(lock))
        result = await conn.execute(_insert(delivery_id, kind, detail, now, ~seen.exists()))
    return bool(result.rowcount)


def _insert(
    delivery_id: uuid.UUID,
    kind: str,
    detail: dict[str, Any],
    now: datetime,
    *conditions: sa.ColumnElement[bool],
) -> sa.Insert:
    """One statement: the event only if its delivery exists, without a foreign key error
    for a delivery that retention removed."""
    exists = sa.select(delivery.c.id).where(delivery.c.id == delivery_id)
    values = sa.select(
        sa.literal(new_id(), sa.Uuid),
        sa.literal(delivery_id, sa.Uuid),
        sa.literal(kind),
        sa.literal(now, delivery_event.c.at.type),
        sa.literal(detail, delivery_event.c.detail.type),
    ).where(exists.exists(), *conditions)
    return sa.insert(delivery_event).from_select(
        ["id", "delivery_id", "kind", "at", "detail"], values
    )


def summary(events: Iterable[DeliveryEvent]) -> EngagementSummary:
    """First and total opens and clicks of one delivery's events; machine opens apart."""
    events = list(events)
    opens = [e for e in events if e.kind == OPENED]
    clicks = [e for e in events if e.kind == CLICKED]
    human = [e for e in opens if not (e.detail or {}).get("machine")]
    return EngagementSummary(
        opens=len(opens),
        human_opens=len(human),
        clicks=len(clicks),
        first_opened_at=min((e.at for e in opens), default=None),
        first_clicked_at=min((e.at for e in clicks), default=None),
    )
