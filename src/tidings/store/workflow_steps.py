"""Workflow steps (docs/workflows.md): their rows written at accept, claimed under a lease,
completed under a fence, cancelled by key, and read back. Every statement on
``workflow_step``."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.ids import new_id
from tidings.states import Status
from tidings.store.dialects import Variants
from tidings.store.engine import Database
from tidings.store.schema import delivery, delivery_event, event, notification, workflow_step


class StepState(StrEnum):
    WAITING = "WAITING"  # an earlier step has not finished
    PENDING = "PENDING"  # due at due_at
    RUNNING = "RUNNING"  # claimed, under a lease
    DONE = "DONE"
    SKIPPED = "SKIPPED"
    CANCELLED = "CANCELLED"
    FAILED = "FAILED"


@dataclass(slots=True)
class StepDraft:
    """One step of a notification being accepted."""

    index: int
    kind: str
    spec: Mapping[str, Any]
    # A send's deliveries: {"id", "channel", "address", "status", "skipReason"}.
    deliveries: list[dict[str, Any]] | None = None
    digest_key: str | None = None  # a digest's key, rendered for this notification


@dataclass(slots=True)
class WorkflowDraft:
    steps: list[StepDraft] = field(default_factory=list)
    cancel_key: str | None = None


def step_rows(
    notification_id: uuid.UUID,
    namespace: str,
    priority: str,
    category: str,
    workflow: WorkflowDraft,
    due_at: datetime,
    now: datetime,
) -> list[dict[str, Any]]:
    """The rows of a notification's steps: the first due at ``due_at``, the rest waiting."""
    return [
        {
            "id": new_id(),
            "notification_id": notification_id,
            "step_index": step.index,
            "kind": step.kind,
            "spec": step.spec,
            "state": StepState.PENDING.value if step.index == 0 else StepState.WAITING.value,
            "attempts": 0,
            "due_at": due_at if step.index == 0 else None,
            "namespace": namespace,
            "cancel_key": workflow.cancel_key,
            "priority": priority,
            "category": category,
            "deliveries": step.deliveries,
            "digest_key": step.digest_key,
            "created_at": now,
            "updated_at": now,
        }
        for step in workflow.steps
    ]


async def insert_steps_sqlite(conn: AsyncConnection, rows: Sequence[dict[str, Any]]) -> None:
    if rows:
        await conn.execute(sa.insert(workflow_step), list(rows))


_PG_COLUMNS = {
    "id": "uuid",
    "notification_id": "uuid",
    "step_index": "int",
    "kind": "text",
    "spec": "jsonb",
    "state": "text",
    "due_at": "timestamptz",
    "namespace": "text",
    "cancel_key": "text",
    "priority": "text",
    "category": "text",
    "deliveries": "jsonb",
    "digest_key": "text",
}


def _pg_insert_text() -> str:
    arrays = ", ".join(
        f"${i}::{'text' if kind == 'jsonb' else kind}[]"
        for i, kind in enumerate(_PG_COLUMNS.values(), start=1)
    )
    values = [
        f"u.{name}::jsonb" if kind == "jsonb" else f"u.{name}" for name, kind in _PG_COLUMNS.items()
    ]
    now = f"${len(_PG_COLUMNS) + 1}::timestamptz"
    return (
        f"INSERT INTO workflow_step ({', '.join(_PG_COLUMNS)}, attempts, created_at, updated_at)"
        f" SELECT {', '.join(values)}, 0, {now}, {now}"
        f" FROM unnest({arrays}) AS u({', '.join(_PG_COLUMNS)})"
    )


_PG_INSERT = _pg_insert_text()


async def insert_steps_postgres(conn: Any, rows: Sequence[dict[str, Any]], now: datetime) -> None:
    """On the intake's asyncpg connection, inside its transaction: one statement."""
    if not rows:
        return
    columns = []
    for name, kind in _PG_COLUMNS.items():
        values = [row[name] for row in rows]
        if kind == "jsonb":
            values = [None if v is None else json.dumps(v) for v in values]
        columns.append(values)
    await conn.execute(_PG_INSERT, *columns, now)


_DB_NOW = Variants(
    postgres=sa.text("SELECT clock_timestamp()"),
    sqlite=sa.text("SELECT strftime('%Y-%m-%d %H:%M:%f', 'now')"),
)


async def database_now(db: Database) -> datetime:
    """The database's clock: every step's time comes from it, never from a process."""
    async with db.engine.connect() as conn:
        value = (await conn.execute(_DB_NOW.of(db))).scalar_one()
    if isinstance(value, str):  # SQLite: UTC text
        return datetime.fromisoformat(value).replace(tzinfo=UTC)
    assert isinstance(value, datetime)
    return value.astimezone(UTC)


@dataclass(frozen=True, slots=True)
class ClaimedStep:
    id: uuid.UUID
    notification_id: uuid.UUID
    step_index: int
    kind: str
    spec: Mapping[str, Any]
    attempts: int
    priority: str
    category: str
    deliveries: list[dict[str, Any]] | None
    namespace: str
    digest_key: str | None
    digest_id: uuid.UUID | None


_CLAIMED = (
    workflow_step.c.id,
    workflow_step.c.notification_id,
    workflow_step.c.step_index,
    workflow_step.c.kind,
    workflow_step.c.spec,
    workflow_step.c.attempts,
    workflow_step.c.priority,
    workflow_step.c.category,
    workflow_step.c.deliveries,
    workflow_step.c.namespace,
    workflow_step.c.digest_key,
    workflow_step.c.digest_id,
)


async def claim_due(
    db: Database, now: datetime, lease_until: datetime, limit: int
) -> list[ClaimedStep]:
    """Claim up to ``limit`` steps due by ``now``, and steps whose lease ran out (their
    runner died): RUNNING, ``attempts + 1``, leased until ``lease_until``. Rows are locked
    with SKIP LOCKED on PostgreSQL, so runners in several processes share the work."""
    runnable = sa.or_(
        sa.and_(workflow_step.c.state == StepState.PENDING.value, workflow_step.c.due_at <= now),
        sa.and_(
            workflow_step.c.state == StepState.RUNNING.value, workflow_step.c.lease_until < now
        ),
    )
    due = (
        sa.select(workflow_step.c.id)
        .where(runnable)
        .order_by(workflow_step.c.id)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    claim = (
        sa.update(workflow_step)
        .where(workflow_step.c.id.in_(due.scalar_subquery()))
        .values(
            state=StepState.RUNNING.value,
            attempts=workflow_step.c.attempts + 1,
            lease_until=lease_until,
            updated_at=now,
        )
        .returning(*_CLAIMED)
    )
    # A read first: most rounds find nothing, and on SQLite a write takes the one lock.
    async with db.engine.connect() as conn:
        probe = sa.select(workflow_step.c.id).where(runnable).limit(1)
        if (await conn.execute(probe)).first() is None:
            return []
    async with db.engine.begin() as conn:
        rows = (await conn.execute(claim)).all()
    # RETURNING keeps no order: oldest notification first (the first of a burst opens
    # its digest).
    steps = [ClaimedStep(**row._mapping) for row in rows]
    return sorted(steps, key=lambda step: (step.notification_id, step.step_index))


@dataclass(frozen=True, slots=True)
class Completion:
    """What running a claimed step decided."""

    state: StepState
    skip_reason: str | None = None
    # When the next step is due (None: at once), or no next step (``ends``).
    next_due: datetime | None = None
    ends: bool = False
    insert_deliveries: bool = False


async def complete(db: Database, step: ClaimedStep, done: Completion, now: datetime) -> bool:
    """Write the step's end under its fence (RUNNING with the claimed attempts), and in the
    same transaction its deliveries and the next step's due time. False: the fence failed
    (the lease was lost and the step claimed again, or it was cancelled): nothing written."""
    async with db.engine.begin() as conn:
        return await complete_in(db, conn, step, done, now)


async def complete_in(
    db: Database, conn: AsyncConnection, step: ClaimedStep, done: Completion, now: datetime
) -> bool:
    """``complete`` inside the caller's transaction."""
    fenced = (
        sa.update(workflow_step)
        .where(
            workflow_step.c.id == step.id,
            workflow_step.c.state == StepState.RUNNING.value,
            workflow_step.c.attempts == step.attempts,
        )
        .values(
            state=done.state.value,
            skip_reason=done.skip_reason,
            ran_at=now,
            lease_until=None,
            updated_at=now,
        )
    )
    if (await conn.execute(fenced)).rowcount != 1:
        return False
    await conn.execute(step_event(db, step, done.state.value, done.skip_reason, now))
    if done.insert_deliveries and step.deliveries:
        await conn.execute(sa.insert(delivery), _delivery_rows(step, now))
    if done.ends:
        # Nothing after it runs (a throttled notification, a failed step).
        await conn.execute(
            sa.update(workflow_step)
            .where(
                workflow_step.c.notification_id == step.notification_id,
                workflow_step.c.step_index > step.step_index,
                workflow_step.c.state == StepState.WAITING.value,
            )
            .values(state=StepState.SKIPPED.value, skip_reason=done.skip_reason, updated_at=now)
        )
    else:
        await conn.execute(_next_step(step, done.next_due or now, now))
    return True


def step_event(
    db: Database,
    step: ClaimedStep,
    state: str,
    skip_reason: str | None,
    now: datetime,
    kind: str = "step.completed",
    extra: Mapping[str, Any] | None = None,
) -> sa.Insert:
    """The event log's row for a step's end (or a digest's close), in its transaction."""
    data = {"index": step.step_index, "kind": step.kind, "state": state}
    if skip_reason is not None:
        data["skipReason"] = skip_reason
    return sa.insert(event).values(
        txid=_PLACE.of(db),
        type=kind,
        at=now,
        notification_id=step.notification_id,
        data={**data, **(extra or {})},
    )


# PostgreSQL: the writing transaction's id (store/events.py); SQLite: none, the id orders.
_PLACE = Variants(
    postgres=sa.literal_column("pg_current_xact_id()::text::bigint"),
    sqlite=sa.null(),
)


def _next_step(step: ClaimedStep, due_at: datetime, now: datetime) -> sa.Update:
    # Only from WAITING: a cancelled next step stays cancelled.
    return (
        sa.update(workflow_step)
        .where(
            workflow_step.c.notification_id == step.notification_id,
            workflow_step.c.step_index == step.step_index + 1,
            workflow_step.c.state == StepState.WAITING.value,
        )
        .values(state=StepState.PENDING.value, due_at=due_at, updated_at=now)
    )


def _delivery_rows(step: ClaimedStep, now: datetime) -> list[dict[str, Any]]:
    rows = []
    for item in step.deliveries or []:
        pending = item["status"] == Status.PENDING.value
        rows.append(
            {
                "id": uuid.UUID(item["id"]),
                "notification_id": step.notification_id,
                "channel": item["channel"],
                "address": item["address"],
                "priority": step.priority,
                "category": step.category,
                "status": item["status"],
                "attempts": 0,
                "next_attempt_at": now if pending else None,
                "lease_until": None,
                "skip_reason": item.get("skipReason"),
                "campaign_id": None,
                "created_at": now,
                "updated_at": now,
            }
        )
    return rows


async def channel_reached(
    db: Database, notification_id: uuid.UUID, channel: str, kinds: Sequence[str]
) -> bool:
    """Whether a delivery of the notification on ``channel`` has an event of one of
    ``kinds`` in its history (or, for ``delivered``, its status)."""
    ids = sa.select(delivery.c.id).where(
        delivery.c.notification_id == notification_id, delivery.c.channel == channel
    )
    engaged = sa.select(delivery_event.c.id).where(
        delivery_event.c.delivery_id.in_(ids.scalar_subquery()),
        delivery_event.c.kind.in_(list(kinds)),
    )
    statuses = [Status.DELIVERED.value] if "delivered" in kinds else []
    reached = ids.where(delivery.c.status.in_(statuses))
    query = sa.select(sa.or_(engaged.exists(), reached.exists()))
    async with db.engine.connect() as conn:
        return bool((await conn.execute(query)).scalar_one())


async def cancel(db: Database, namespace: str, cancel_key: str, now: datetime) -> int:
    """End every step not yet run of the namespace's notifications carrying ``cancel_key``
    (CANCELLED); the number of notifications that had one. A step running now finishes,
    and the step after it stays cancelled."""
    statement = (
        sa.update(workflow_step)
        .where(
            workflow_step.c.namespace == namespace,
            workflow_step.c.cancel_key == cancel_key,
            workflow_step.c.state.in_([StepState.PENDING.value, StepState.WAITING.value]),
        )
        .values(state=StepState.CANCELLED.value, lease_until=None, updated_at=now)
        .returning(workflow_step.c.notification_id)
    )
    async with db.engine.begin() as conn:
        rows = (await conn.execute(statement)).all()
    return len({row.notification_id for row in rows})


@dataclass(frozen=True, slots=True)
class StepRecord:
    """One step as ``GET /v1/notifications/{id}`` shows it."""

    index: int
    kind: str
    state: str
    due_at: datetime | None
    ran_at: datetime | None
    skip_reason: str | None
    attempts: int


async def steps_of(db: Database, notification_id: uuid.UUID) -> list[StepRecord]:
    query = (
        sa.select(workflow_step)
        .where(workflow_step.c.notification_id == notification_id)
        .order_by(workflow_step.c.step_index)
    )
    async with db.engine.connect() as conn:
        rows = (await conn.execute(query)).all()
    return [
        StepRecord(
            index=row.step_index,
            kind=row.kind,
            state=row.state,
            due_at=row.due_at,
            ran_at=row.ran_at,
            skip_reason=row.skip_reason,
            attempts=row.attempts,
        )
        for row in rows
    ]


async def delivery_namespace(db: Database, delivery_id: uuid.UUID) -> str | None:
    """The namespace of the notification a delivery belongs to; None: no such delivery."""
    query = (
        sa.select(notification.c.namespace)
        .select_from(delivery.join(notification, notification.c.id == delivery.c.notification_id))
        .where(delivery.c.id == delivery_id)
    )
    async with db.engine.connect() as conn:
        return (await conn.execute(query)).scalar_one_or_none()
