"""Digests (docs/workflows.md): a digest step opens its group's digest or joins the open
one, and the step that opened it closes it, all under the step's fence. At most one OPEN
digest per (namespace, type, user, key) (a unique index); the close is one fenced update,
so no two runners can both close, and no notification joins after it."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.ids import new_id
from tidings.store.engine import Database
from tidings.store.schema import notification, workflow_digest, workflow_step
from tidings.store.workflow_steps import ClaimedStep, StepState, step_event

_OF_NOTIFICATION = notification.c.id == workflow_step.c.notification_id
OPEN = "OPEN"  # taking notifications
CLOSING = "CLOSING"  # full, or its window passed: its leader's step closes it
CLOSED = "CLOSED"


@dataclass(frozen=True, slots=True)
class DigestRun:
    """What one run of a digest step did."""

    action: str  # "opened", "joined", "closed"
    digest_id: uuid.UUID
    count: int = 0


async def run_digest(
    db: Database, step: ClaimedStep, window: timedelta, most: int, now: datetime
) -> DigestRun | None:
    """Run a claimed digest step in one transaction; None when its fence failed. An
    ``IntegrityError`` means another runner opened the group's digest at the same moment:
    run it again, it joins that one."""
    async with db.engine.begin() as conn:
        fenced = await conn.execute(
            sa.update(workflow_step)
            .where(
                workflow_step.c.id == step.id,
                workflow_step.c.state == StepState.RUNNING.value,
                workflow_step.c.attempts == step.attempts,
            )
            .values(updated_at=now)
            .returning(workflow_step.c.digest_id)
        )
        row = fenced.first()
        if row is None:
            return None
        if row.digest_id is not None:
            return await _close(db, conn, step, row.digest_id, now)
        group = await _group(conn, step)
        joined = await _join(conn, group, now)
        if joined is not None:
            return await _joined(db, conn, step, joined, now)
        return await _open(conn, step, group, window, most, now)


async def _group(conn: AsyncConnection, step: ClaimedStep) -> dict[str, Any]:
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
        "digest_key": step.digest_key or "",
    }


async def _join(conn: AsyncConnection, group: dict[str, Any], now: datetime) -> Any:
    d = workflow_digest.c
    # Row-locked: a close committed meanwhile makes this match nothing (then: open anew).
    statement = (
        sa.update(workflow_digest)
        .where(
            d.namespace == group["namespace"],
            d.type == group["type"],
            d.user_id == group["user_id"],
            d.digest_key == group["digest_key"],
            d.state == OPEN,
            d.closes_at > now,
            d.count < d.max,
        )
        .values(
            count=d.count + 1,
            state=sa.case((d.count + 1 >= d.max, CLOSING), else_=OPEN),
        )
        .returning(d.id, d.count, d.max, d.leader_step_id)
    )
    return (await conn.execute(statement)).first()


async def _joined(
    db: Database, conn: AsyncConnection, step: ClaimedStep, joined: Any, now: datetime
) -> DigestRun:
    # This notification is an item of that digest; its own later steps never run.
    await conn.execute(
        sa.update(workflow_step)
        .where(workflow_step.c.id == step.id)
        .values(
            state=StepState.DONE.value,
            digest_id=joined.id,
            ran_at=now,
            lease_until=None,
            skip_reason="digested",
        )
    )
    extra = {"digestId": str(joined.id)}
    await conn.execute(step_event(db, step, StepState.DONE.value, "digested", now, extra=extra))
    await conn.execute(
        sa.update(workflow_step)
        .where(
            workflow_step.c.notification_id == step.notification_id,
            workflow_step.c.step_index > step.step_index,
            workflow_step.c.state == StepState.WAITING.value,
        )
        .values(state=StepState.SKIPPED.value, skip_reason="digested", updated_at=now)
    )
    if joined.count >= joined.max:  # full: its leader closes it now
        await conn.execute(
            sa.update(workflow_step)
            .where(
                workflow_step.c.id == joined.leader_step_id,
                workflow_step.c.state == StepState.PENDING.value,
            )
            .values(due_at=now, updated_at=now)
        )
    return DigestRun("joined", joined.id, joined.count)


async def _open(
    conn: AsyncConnection,
    step: ClaimedStep,
    group: dict[str, Any],
    window: timedelta,
    most: int,
    now: datetime,
) -> DigestRun:
    digest_id = new_id()
    closes_at = now + window
    d = workflow_digest.c
    # The group's OPEN digest whose window passed takes no one more (its leader's step,
    # due, closes it): this notification starts the next.
    await conn.execute(
        sa.update(workflow_digest)
        .where(
            d.namespace == group["namespace"],
            d.type == group["type"],
            d.user_id == group["user_id"],
            d.digest_key == group["digest_key"],
            d.state == OPEN,
            d.closes_at <= now,
        )
        .values(state=CLOSING)
    )
    await conn.execute(
        sa.insert(workflow_digest).values(
            id=digest_id,
            state=OPEN,
            count=1,
            max=most,
            leader_step_id=step.id,
            opened_at=now,
            closes_at=closes_at,
            **group,
        )
    )
    # The step waits for the window's end (or the digest's max), then closes it.
    await conn.execute(
        sa.update(workflow_step)
        .where(workflow_step.c.id == step.id)
        .values(
            state=StepState.PENDING.value,
            due_at=closes_at if most > 1 else now,
            digest_id=digest_id,
            lease_until=None,
        )
    )
    return DigestRun("opened", digest_id, 1)


async def _close(
    db: Database, conn: AsyncConnection, step: ClaimedStep, digest_id: uuid.UUID, now: datetime
) -> DigestRun:
    d = workflow_digest.c
    await conn.execute(
        sa.update(workflow_digest)
        .where(d.id == digest_id, d.state.in_([OPEN, CLOSING]))
        .values(state=CLOSED, closed_at=now)
    )
    items = (
        await conn.execute(
            sa.select(notification.c.data)
            .select_from(workflow_step.join(notification, _OF_NOTIFICATION))
            .where(workflow_step.c.digest_id == digest_id, workflow_step.c.kind == "digest")
            .order_by(notification.c.id)
        )
    ).all()
    leader = (
        await conn.execute(
            sa.select(notification.c.data).where(notification.c.id == step.notification_id)
        )
    ).scalar_one()
    # What the templates of the sends after it see: digest.count, digest.items (oldest
    # first). The one update of a notification row after accept.
    digest = {"count": len(items), "items": [row.data for row in items]}
    await conn.execute(
        sa.update(notification)
        .where(notification.c.id == step.notification_id)
        .values(data={**leader, "digest": digest})
    )
    await conn.execute(
        sa.update(workflow_step)
        .where(workflow_step.c.id == step.id)
        .values(state=StepState.DONE.value, ran_at=now, lease_until=None)
    )
    extra = {"digestId": str(digest_id), "count": len(items)}
    await conn.execute(step_event(db, step, StepState.DONE.value, None, now, extra=extra))
    closed = step_event(db, step, StepState.DONE.value, None, now, "digest.closed", extra)
    await conn.execute(closed)
    await conn.execute(
        sa.update(workflow_step)
        .where(
            workflow_step.c.notification_id == step.notification_id,
            workflow_step.c.step_index == step.step_index + 1,
            workflow_step.c.state == StepState.WAITING.value,
        )
        .values(state=StepState.PENDING.value, due_at=now, updated_at=now)
    )
    return DigestRun("closed", digest_id, len(items))
