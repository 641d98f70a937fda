"""The mass deactivation guard's rows (dispatch/protection/deactivation_guard.py): each push
account's last trip and last clear, which every dispatcher follows; an operator's reset,
which also makes the deliveries the guard held due again; and the evidence a deactivation
waits for, its delivery's ``deactivation_pending`` event."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.priorities import Channel, Priority
from tidings.states import Status
from tidings.store.engine import Database
from tidings.store.schema import deactivation_guard, delivery, delivery_event
from tidings.store.upsert import insert

# The history events of a deactivation the guard has not let happen (yet).
PENDING_EVENT = "deactivation_pending"  # waits a window for the guard's verdict
HELD_EVENT = "deactivation_held"  # the guard had tripped: held, no deactivation
OPERATOR = "operator"  # cleared_by of a reset


@dataclass(frozen=True)
class GuardRecord:
    """One account's row: the last trip anywhere in the fleet, and the last clear."""

    account: str
    tripped_at: datetime | None = None
    hold_until: datetime | None = None
    share: float | None = None
    samples: int | None = None
    reason: str | None = None
    tripped_by: str | None = None
    cleared_at: datetime | None = None
    cleared_by: str | None = None

    @property
    def tripped(self) -> bool:
        """The last trip is newer than the last clear."""
        if self.tripped_at is None:
            return False
        return self.cleared_at is None or self.cleared_at < self.tripped_at

    @property
    def changed_at(self) -> datetime | None:
        """When the newer of the trip and the clear happened."""
        times = [t for t in (self.tripped_at, self.cleared_at) if t is not None]
        return max(times) if times else None

    def state(self, now: datetime) -> str:
        """``clear``, ``tripped`` (holding) or ``probing`` (the hold is over, dispatchers
        are trying a few sends)."""
        if not self.tripped:
            return "clear"
        return "tripped" if self.hold_until is not None and self.hold_until > now else "probing"


def held_note(account: str) -> str:
    """The ``last_error`` of a delivery the guard holds: what a reset finds them by."""
    return f"held by the deactivation guard of {account}"


async def record_trip(
    db: Database,
    account: str,
    *,
    at: datetime,
    hold_until: datetime,
    share: float,
    samples: int,
    reason: str,
    by: str,
) -> None:
    row = {
        "account": account,
        "tripped_at": at,
        "hold_until": hold_until,
        "share": share,
        "samples": samples,
        "reason": reason[:100],
        "tripped_by": by[:64],
        "updated_at": at,
    }
    async with db.engine.begin() as conn:
        await conn.execute(_upsert(db, row))


async def record_clear(db: Database, account: str, at: datetime, by: str) -> None:
    row = {"account": account, "cleared_at": at, "cleared_by": by[:64], "updated_at": at}
    async with db.engine.begin() as conn:
        await conn.execute(_upsert(db, row))


async def reset(db: Database, account: str, now: datetime, due: datetime) -> int:
    """An operator's clear, and the deliveries the guard held for ``account`` made due at
    ``due`` (not later than they were); how many. One transaction."""
    row = {"account": account, "cleared_at": now, "cleared_by": OPERATOR, "updated_at": now}
    async with db.engine.begin() as conn:
        await conn.execute(_upsert(db, row))
        return await _release_held(conn, account, now, due)


async def _release_held(conn: AsyncConnection, account: str, now: datetime, due: datetime) -> int:
    statement = (
        sa.update(delivery)
        .where(
            delivery.c.status == Status.PENDING.value,
            # The due index's columns: the rows waiting longer than ``due``, per priority.
            delivery.c.priority.in_([p.value for p in Priority]),
            delivery.c.next_attempt_at > due,
            delivery.c.channel == Channel.PUSH.value,
            delivery.c.last_error == held_note(account),
        )
        .values(next_attempt_at=due, updated_at=now)
    )
    result = await conn.execute(statement)
    return int(result.rowcount or 0)


async def records(db: Database) -> list[GuardRecord]:
    query = sa.select(deactivation_guard).order_by(deactivation_guard.c.account)
    async with db.engine.connect() as conn:
        return [_record(row._mapping) for row in await conn.execute(query)]


async def pending_since(db: Database, delivery_id: uuid.UUID, since: datetime) -> datetime | None:
    """When the delivery's deactivation began to wait for the guard's verdict, counting only
    waits that began at ``since`` or later; None when none did."""
    query = (
        sa.select(delivery_event.c.at)
        .where(
            delivery_event.c.delivery_id == delivery_id,
            delivery_event.c.kind == PENDING_EVENT,
            delivery_event.c.at >= since,
        )
        .order_by(delivery_event.c.at)
        .limit(1)
    )
    async with db.engine.connect() as conn:
        found: datetime | None = (await conn.execute(query)).scalar_one_or_none()
    return found


def _upsert(db: Database, row: dict[str, Any]) -> Any:
    statement = insert(db, deactivation_guard).values(row)
    updates = {name: statement.excluded[name] for name in row if name != "account"}
    return statement.on_conflict_do_update(index_elements=["account"], set_=updates)


def _record(row: Any) -> GuardRecord:
    return GuardRecord(
        account=row["account"],
        tripped_at=row["tripped_at"],
        hold_until=row["hold_until"],
        share=row["share"],
        samples=row["samples"],
        reason=row["reason"],
        tripped_by=row["tripped_by"],
        cleared_at=row["cleared_at"],
        cleared_by=row["cleared_by"],
    )
