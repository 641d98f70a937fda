"""Throttles (docs/workflows.md): whether a notification passes its group's limit, judged
with the group's row locked, in the transaction of the step's fenced end."""

from __future__ import annotations

from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.store.engine import Database
from tidings.store.schema import notification, workflow_throttle
from tidings.store.workflow_steps import ClaimedStep, Completion, StepState, complete_in


async def run_throttle(
    db: Database, step: ClaimedStep, limit: int, window: timedelta, now: datetime
) -> Completion | None:
    """Pass the step (DONE) or end the notification (SKIPPED ``throttled``); None when its
    fence failed (nothing written)."""
    async with db.engine.begin() as conn:
        group = await _group(conn, step)
        await conn.execute(
            db.dialect.insert(workflow_throttle)
            .values(**group, passed=[], updated_at=now)
            .on_conflict_do_nothing()
        )
        keys = [workflow_throttle.c[name] == value for name, value in group.items()]
        row = (
            await conn.execute(db.dialect.locked(sa.select(workflow_throttle).where(*keys)))
        ).one()
        since = now - window
        recent = [at for at in row.passed if datetime.fromisoformat(at) > since]
        passes = len(recent) < limit
        done = (
            Completion(StepState.DONE)
            if passes
            else Completion(StepState.SKIPPED, "throttled", ends=True)
        )
        if not await complete_in(db, conn, step, done, now):
            return None
        if passes:
            recent.append(now.isoformat())
        await conn.execute(
            sa.update(workflow_throttle).where(*keys).values(passed=recent, updated_at=now)
        )
    return done


async def _group(conn: AsyncConnection, step: ClaimedStep) -> dict[str, str]:
    found = (
        await conn.execute(
            sa.select(notification.c.type, notification.c.user_id).where(
                notification.c.id == step.notification_id
            )
        )
    ).one()
    return {
        "namespace": step.namespace,
        "type": found.type,
        "user_id": found.user_id or "",
        "throttle_key": step.digest_key or "",
    }
