"""Workflows as the API serves them: cancelling by key, engagement reported by the app,
a notification's steps (docs/workflows.md)."""

from __future__ import annotations

import uuid

from tidings.store import engagement, workflow_steps
from tidings.store.engine import Database
from tidings.store.workflow_steps import StepRecord, database_now, steps_of

__all__ = ["StepRecord", "cancel", "record_engagement", "steps_of"]


async def cancel(db: Database, namespace: str, cancel_key: str) -> int:
    """End the steps not yet run of the namespace's notifications with ``cancel_key``; how
    many notifications had one."""
    return await workflow_steps.cancel(db, namespace, cancel_key, await database_now(db))


async def record_engagement(
    db: Database, namespace: str, delivery_id: uuid.UUID, event: str
) -> bool:
    """``event`` (opened, clicked) in the delivery's history, reported by the app; False
    when the namespace has no such delivery."""
    if await workflow_steps.delivery_namespace(db, delivery_id) != namespace:
        return False
    now = await database_now(db)
    return await engagement.record(db, delivery_id, event, {"source": "api"}, now)
