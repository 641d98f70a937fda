"""Writing outcomes back: the hot half of the dispatcher's SQL, with the batch's effects.

Each outcome is fenced by (status SENDING, attempts): a worker whose lease expired and whose
delivery was claimed again cannot overwrite the newer attempt. The columns an outcome sets
are listed once (``OUTCOME_COLUMNS``); both dialects' statements and every row's parameters
are derived from that list by name, so no statement depends on the order of a tuple.
"""

from __future__ import annotations

import json
import operator
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.states import Effect, FailureKind, Status
from tidings.store.claims import event_row
from tidings.store.effects import apply_effects
from tidings.store.engine import Database
from tidings.store.schema import delivery, delivery_event


@dataclass(slots=True, kw_only=True)  # one per delivery sent: no frozen overhead
class Outcome:
    """The result of one attempt, to be written back (in batches)."""

    delivery_id: uuid.UUID
    claimed_attempts: int  # the fencing token: the attempt this outcome belongs to
    status: Status
    attempts: int  # after this outcome (one less when the attempt is given back)
    next_attempt_at: datetime | None = None
    provider: str | None = None
    provider_msg_id: str | None = None
    last_error: str | None = None
    failure_kind: FailureKind | None = None
    skip_reason: str | None = None
    sent_at: datetime | None = None
    template_version: int | None = None  # None keeps the row's
    # A permanent error's consequence for the address, beyond this delivery.
    effect: Effect | None = None
    effect_reason: str | None = None
    # When the provider last confirmed the address dead (APNs' 410): a device registered
    # after it is not deactivated.
    effect_at: datetime | None = None
    event: str | None = None  # a delivery_event kind, for what the row cannot hold
    event_detail: dict[str, Any] | None = None


# The delivery columns an outcome sets, each an Outcome field of the same name.
OUTCOME_COLUMNS = (
    "status",
    "attempts",
    "next_attempt_at",
    "provider",
    "provider_msg_id",
    "last_error",
    "failure_kind",
    "skip_reason",
    "sent_at",
)
# Every parameter of the outcome statement, each an Outcome field (the fence, the columns,
# the template version), and the time of the write.
_FIELDS = ("delivery_id", "claimed_attempts", *OUTCOME_COLUMNS, "template_version")
_PARAMS = (*_FIELDS, "now")
# The fields' values in _FIELDS' order, in one C call: the hot path's rows are built here.
_field_values = operator.attrgetter(*_FIELDS)


def _params(outcome: Outcome, now: datetime) -> dict[str, Any]:
    """The statement's parameters by name (enums as their text)."""
    values = zip(_PARAMS, (*_field_values(outcome), now), strict=True)
    return {name: _plain(value) for name, value in values}


def _plain(value: Any) -> Any:
    return value.value if isinstance(value, Enum) else value


_write_outcome = (
    sa.update(delivery)
    .where(
        delivery.c.id == sa.bindparam("b_delivery_id"),
        delivery.c.status == Status.SENDING.value,
        delivery.c.attempts == sa.bindparam("b_claimed_attempts"),
    )
    .values(
        {name: sa.bindparam(f"b_{name}") for name in OUTCOME_COLUMNS}
        | {
            "lease_until": None,
            "updated_at": sa.bindparam("b_now"),
            "template_version": sa.func.coalesce(
                sa.bindparam("b_template_version", type_=sa.Integer),
                delivery.c.template_version,
            ),
        }
    )
)


def _sa_params(outcome: Outcome, now: datetime) -> dict[str, Any]:
    return {f"b_{name}": value for name, value in _params(outcome, now).items()}


# asyncpg numbers its parameters: each name's number comes from its place in _PARAMS.
_PG = {name: f"${number}" for number, name in enumerate(_PARAMS, 1)}
# One row per statement, found by its key: a set-based UPDATE ... FROM unnest() looked
# better but let the planner, trusting statistics that saw no SENDING rows, pick a scan or
# a nested loop that made each batch quadratic. asyncpg pipelines the executemany.
_PG_WRITE_OUTCOME = f"""
UPDATE delivery
SET {", ".join(f"{name} = {_PG[name]}" for name in OUTCOME_COLUMNS)}, lease_until = NULL,
    updated_at = {_PG["now"]},
    template_version = COALESCE({_PG["template_version"]}::integer, template_version)
WHERE id = {_PG["delivery_id"]} AND status = 'SENDING' AND attempts = {_PG["claimed_attempts"]}
"""
_PG_INSERT_EVENT = """
INSERT INTO delivery_event (id, delivery_id, kind, at, detail) VALUES ($1, $2, $3, $4, $5)
"""


def _pg_row(outcome: Outcome, now: datetime) -> tuple[Any, ...]:
    """The parameters in _PARAMS' order (asyncpg takes the enums, being strings, as they are)."""
    return (*_field_values(outcome), now)


async def write_outcomes(db: Database, outcomes: Sequence[Outcome], now: datetime) -> None:
    """Write a batch of outcomes with their events and effects, all in one transaction.

    An outcome whose fence fails (its lease expired and the delivery was claimed again)
    changes nothing and leaves no event: the history shows only what took effect.
    """
    if not outcomes:
        return
    if db.is_postgres and not any(o.effect for o in outcomes):
        await _write_postgres(db, outcomes, now)  # the hot path: no effects to apply
        return
    async with db.engine.begin() as conn:
        await _write(conn, outcomes, now)
        await apply_effects(db, conn, outcomes, now)


async def _write(conn: AsyncConnection, outcomes: Sequence[Outcome], now: datetime) -> None:
    quiet = [_sa_params(o, now) for o in outcomes if not o.event]
    if quiet:
        await conn.execute(_write_outcome, quiet)
    events = []
    for outcome in (o for o in outcomes if o.event):  # the rarer path: failures
        result = await conn.execute(_write_outcome, _sa_params(outcome, now))
        if result.rowcount == 1:
            events.append(_outcome_event(outcome, now))
    if events:
        await conn.execute(sa.insert(delivery_event), events)


async def _write_postgres(db: Database, outcomes: Sequence[Outcome], now: datetime) -> None:
    quiet = [_pg_row(o, now) for o in outcomes if not o.event]
    loud = [o for o in outcomes if o.event]
    async with db.asyncpg() as conn:
        # No transaction needed: after a failure the batch is written again, and rows already
        # written then fail their fence (no longer SENDING) and change nothing.
        if quiet:
            await conn.executemany(_PG_WRITE_OUTCOME, quiet)
        if not loud:
            return
        async with conn.transaction():
            events = [
                _outcome_event(o, now)
                for o in loud
                if await conn.fetchval(_PG_WRITE_OUTCOME + " RETURNING id", *_pg_row(o, now))
                is not None
            ]
            if events:
                await conn.executemany(
                    _PG_INSERT_EVENT,
                    [
                        (e["id"], e["delivery_id"], e["kind"], e["at"], json.dumps(e["detail"]))
                        for e in events
                    ],
                )


def _outcome_event(outcome: Outcome, now: datetime) -> dict[str, Any]:
    assert outcome.event is not None
    return event_row(outcome.delivery_id, outcome.event, now, outcome.event_detail)


async def reachable(db: Database) -> bool:
    """Whether the database answers at all: tells a refused batch from an unreachable one."""
    try:
        async with db.engine.connect() as conn:
            await conn.execute(sa.text("SELECT 1"))
    except Exception:
        return False
    return True
