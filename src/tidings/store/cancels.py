"""Cancelling one notification that has not been sent yet (the dashboard's Cancel): its
deliveries not yet claimed become CANCELLED, as a cancelled campaign's do
(store/campaigns.cancel_unclaimed), and its workflow steps not yet run end CANCELLED, as a
cancel by key ends them (store/workflow_steps.cancel). A delivery being sent right now is
left to finish: its provider call may already be under way."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa

from tidings.ids import new_id
from tidings.states import Status
from tidings.store.campaigns import NOT_CLAIMED
from tidings.store.engine import Database
from tidings.store.schema import delivery, delivery_event, notification, workflow_step
from tidings.store.workflow_steps import StepState

NOT_RUN = (StepState.PENDING.value, StepState.WAITING.value)


@dataclass(frozen=True)
class Cancelled:
    deliveries: int
    steps: int


async def cancel_notification(
    db: Database, notification_id: uuid.UUID, namespace: str, now: datetime
) -> Cancelled | None:
    """Cancel what of the notification is not yet sent, in one transaction; None when the
    namespace has no such notification. Each cancelled delivery's history says so."""
    owned = sa.select(notification.c.id).where(
        notification.c.id == notification_id, notification.c.namespace == namespace
    )
    # Bounded by the partition key: only the notification's day is read.
    deliveries = (
        sa.update(delivery)
        .where(delivery.c.notification_id == notification_id, delivery.c.status.in_(NOT_CLAIMED))
        .values(
            status=Status.CANCELLED.value, next_attempt_at=None, lease_until=None, updated_at=now
        )
        .returning(delivery.c.id)
    )
    steps = (
        sa.update(workflow_step)
        .where(workflow_step.c.notification_id == notification_id)
        .where(workflow_step.c.state.in_(NOT_RUN))
        .values(state=StepState.CANCELLED.value, lease_until=None, updated_at=now)
    )
    async with db.engine.begin() as conn:
        if (await conn.execute(owned)).first() is None:
            return None
        ids = [row.id for row in await conn.execute(deliveries)]
        ended = (await conn.execute(steps)).rowcount
        detail = {"reason": "cancelled by an operator"}
        for delivery_id in ids:
            await conn.execute(
                sa.insert(delivery_event).values(
                    id=new_id(), delivery_id=delivery_id, kind="cancelled", at=now, detail=detail
                )
            )
    return Cancelled(len(ids), ended)


async def notification_data(
    db: Database, notification_id: uuid.UUID, namespace: str
) -> dict[str, object] | None:
    """The notification's data, what its templates were rendered with; None when the
    namespace has no such notification."""
    query = sa.select(notification.c.data).where(
        notification.c.id == notification_id, notification.c.namespace == namespace
    )
    async with db.engine.connect() as conn:
        row = (await conn.execute(query)).first()
    return None if row is None else dict(row.data or {})
