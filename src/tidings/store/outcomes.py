"""Writing outcomes back: the hot half of the dispatcher's SQL, with the batch's effects.

Each outcome is fenced by (status SENDING, attempts): a worker whose lease expired and whose
delivery was claimed again cannot overwrite the newer attempt. The columns an outcome sets
are listed once (``OUTCOME_COLUMNS``); both dialects' statements and every row's parameters
are derived from that list by name, so no statement depends on the order of a tuple. On
day partitions an outcome updates its delivery's day's partition by name (the day its id
names, store/partition_days.py), which locks that table alone.
"""

from __future__ import annotations

import functools
import json
import operator
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from enum import Enum
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.states import Effect, FailureKind, Status
from tidings.store.claims import ClaimedDelivery, event_row
from tidings.store.dialects import Variants
from tidings.store.dialects.postgres import for_asyncpg
from tidings.store.effects import apply_effects
from tidings.store.engine import Database
from tidings.store.partition_days import day_tables, delivery_day
from tidings.store.partitions import notification_days, partition_name
from tidings.store.schema import delivery, delivery_event

# The longest error text a row keeps.
MAX_ERROR_LENGTH = 1000


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
    # How the attempt's provider call went, for the account's breaker and guard
    # (dispatch/protection/calls.py); never written. ``called``: the call was made, and
    # ``call_error`` is what it raised (None: the provider accepted the message).
    called: bool = field(default=False, compare=False, repr=False)
    call_error: BaseException | None = field(default=None, compare=False, repr=False)

    # The constructors of every outcome the pipeline decides, each naming its event: one
    # place to read what a delivery can end as (docs/architecture.md, Delivery state machine).

    @classmethod
    def sent(
        cls, claimed: ClaimedDelivery, provider: str, provider_msg_id: str | None, now: datetime
    ) -> Outcome:
        """The provider accepted the message."""
        return cls(
            delivery_id=claimed.id,
            claimed_attempts=claimed.attempts,
            status=Status.SENT,
            attempts=claimed.attempts,
            provider=provider,
            provider_msg_id=provider_msg_id,
            sent_at=now,
        )

    @classmethod
    def retry(
        cls,
        claimed: ClaimedDelivery,
        at: datetime,
        error: str,
        provider: str | None,
        detail: dict[str, object],
    ) -> Outcome:
        """A failure the retry policy tries again at ``at``; the attempt stays counted."""
        return cls(
            delivery_id=claimed.id,
            claimed_attempts=claimed.attempts,
            status=Status.PENDING,
            attempts=claimed.attempts,
            next_attempt_at=at,
            last_error=error,
            provider=provider,
            event="retry_scheduled",
            event_detail=detail | {"retryAt": at.isoformat()},
        )

    @classmethod
    def expired(cls, claimed: ClaimedDelivery, ttl_seconds: int | None) -> Outcome:
        """Its type's time to live passed before it could be sent."""
        return cls(
            delivery_id=claimed.id,
            claimed_attempts=claimed.attempts,
            status=Status.EXPIRED,
            attempts=claimed.attempts,
            event="expired",
            event_detail={"ttl": ttl_seconds},
        )

    @classmethod
    def failed(
        cls,
        claimed: ClaimedDelivery,
        kind: FailureKind,
        error: str,
        provider: str | None = None,
        detail: dict[str, object] | None = None,
    ) -> Outcome:
        return cls(
            delivery_id=claimed.id,
            claimed_attempts=claimed.attempts,
            status=Status.FAILED,
            attempts=claimed.attempts,
            last_error=error,
            failure_kind=kind,
            provider=provider,
            event="failed",
            event_detail=(detail or {}) | {"failureKind": kind.value},
        )

    @classmethod
    def poisoned(cls, claimed: ClaimedDelivery, error: BaseException) -> Outcome:
        """The outcome of a delivery whose processing raised what nothing else handled: it
        cannot be processed, and trying it again would only raise again."""
        return cls.failed(claimed, FailureKind.POISON, f"cannot be processed: {describe(error)}")

    @classmethod
    def interrupted(cls, claimed: ClaimedDelivery, provider: str) -> Outcome:
        """Shut down during an at-most-once account's provider call: perhaps sent, so FAILED
        ambiguous (the dead-letter queue) rather than given back to be sent again."""
        error = "shut down during the provider call: perhaps sent, not sent again"
        detail: dict[str, object] = {
            "attempt": claimed.attempts,
            "error": error,
            "kind": FailureKind.AMBIGUOUS.value,
            "provider": provider,
            "perhapsSent": True,
            "reason": "shutdown",
        }
        return cls.failed(claimed, FailureKind.AMBIGUOUS, error, provider, detail)

    @classmethod
    def released(cls, claimed: ClaimedDelivery, now: datetime, reason: str) -> Outcome:
        """Give the delivery back without counting the attempt (shutdown, deferral)."""
        return cls._uncounted(claimed, Status.PENDING, "released", reason, next_attempt_at=now)

    @classmethod
    def deferred(cls, claimed: ClaimedDelivery, until: datetime, reason: str) -> Outcome:
        """Not now (quiet hours, later a rate limit): back to PENDING until ``until``, the
        attempt given back, for it is nobody's failure."""
        return cls._uncounted(claimed, Status.PENDING, "deferred", reason, next_attempt_at=until)

    @classmethod
    def already_sent(
        cls, claimed: ClaimedDelivery, provider: str, provider_msg_id: str | None, now: datetime
    ) -> Outcome:
        """Another attempt sent it, but its outcome was lost (a crash after the provider's
        answer): SENT from what that attempt recorded, without calling the provider again."""
        return cls(
            delivery_id=claimed.id,
            claimed_attempts=claimed.attempts,
            status=Status.SENT,
            attempts=claimed.attempts,
            provider=provider,
            provider_msg_id=provider_msg_id,
            sent_at=now,
            event="already_sent",
            event_detail={"attempt": claimed.attempts},
        )

    @classmethod
    def cancelled(cls, claimed: ClaimedDelivery) -> Outcome:
        """Its campaign was cancelled after the claim: dropped before the provider call."""
        return cls._uncounted(claimed, Status.CANCELLED, "cancelled", "campaign cancelled")

    @classmethod
    def skipped(cls, claimed: ClaimedDelivery, reason: str) -> Outcome:
        """Not to be sent after all (a send-time policy check); no provider was called."""
        return cls._uncounted(claimed, Status.SKIPPED, "skipped", reason, skip_reason=reason)

    @classmethod
    def _uncounted(
        cls, claimed: ClaimedDelivery, status: Status, event: str, reason: str, **fields: Any
    ) -> Outcome:
        """An outcome that gives the claimed attempt back."""
        return cls(
            delivery_id=claimed.id,
            claimed_attempts=claimed.attempts,
            status=status,
            attempts=claimed.attempts - 1,
            event=event,
            event_detail={"reason": reason},
            **fields,
        )


def describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"[:MAX_ERROR_LENGTH]


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


def _update_on(table: sa.TableClause) -> sa.Update:
    """The fenced update of one outcome on ``table`` (``delivery`` or a day's partition)."""
    return (
        sa.update(table)
        .where(
            table.c.id == sa.bindparam("b_delivery_id"),
            # A literal, as in every statement on delivery: the partial indexes match it.
            table.c.status == sa.literal_column(f"'{Status.SENDING.value}'"),
            table.c.attempts == sa.bindparam("b_claimed_attempts"),
        )
        .values(
            {name: sa.bindparam(f"b_{name}") for name in OUTCOME_COLUMNS}
            | {
                "lease_until": sa.null(),
                "send_started_at": sa.null(),  # the attempt is over: its start mark with it
                "updated_at": sa.bindparam("b_now"),
                "template_version": sa.func.coalesce(
                    sa.bindparam("b_template_version", type_=sa.Integer),
                    table.c.template_version,
                ),
            }
        )
    )


_write_outcome = _update_on(delivery)


@functools.lru_cache(maxsize=64)
def _write_outcome_in(day: date) -> sa.Update:
    return _update_on(_delivery_named(partition_name("delivery", day)))


def _delivery_named(name: str) -> sa.TableClause:
    """``delivery``, or a table of its columns named ``name`` (a day's partition)."""
    if name == delivery.name:
        return delivery
    return sa.table(name, *(sa.column(c.name, c.type) for c in delivery.columns))


def _sa_statement(delivery_id: uuid.UUID, partitioned: bool) -> sa.Update:
    day = delivery_day(delivery_id) if partitioned else None
    return _write_outcome if day is None else _write_outcome_in(day)


def _sa_params(outcome: Outcome, now: datetime) -> dict[str, Any]:
    return {f"b_{name}": value for name, value in _params(outcome, now).items()}


# The same statement as asyncpg runs it, for the outcomes with an event, each of which must
# know whether its fence held (the others go set-based: ``_pg_set_update``). Its parameters
# come in one order whatever the table: the bounds below are literals.
_ASYNCPG_OUTCOME = for_asyncpg(_write_outcome)


def _pg_target(delivery_id: uuid.UUID, partitioned: bool) -> tuple[str, str]:
    """The table an outcome of ``delivery_id`` updates, and the condition that bounds it.

    On day partitions: the partition of the day its id names, by name (it locks that table
    and its indexes alone, where any statement on the parent locks every partition's:
    docs/benchmarks.md, Day partitions). Else (plain tables, or an id near a midnight,
    partition_days.delivery_day) the parent, limited to the days the delivery may live in:
    the bounds are literals, so the planner reads only those days' partitions; a few texts
    in all, each prepared once per connection."""
    day = delivery_day(delivery_id) if partitioned else None
    if day is not None:
        return partition_name("delivery", day), ""
    low, high = notification_days(delivery_id)
    bounds = f"notification_id >= '{low}'::uuid AND notification_id < '{high}'::uuid"
    return "delivery", f"AND {bounds}"


@functools.lru_cache(maxsize=64)
def _pg_row_update(table: str, bounds: str) -> str:
    statement = _update_on(_delivery_named(table))
    if bounds:
        statement = statement.where(sa.text(bounds.removeprefix("AND ")))
    rendered = for_asyncpg(statement)
    assert rendered.names == _ASYNCPG_OUTCOME.names, "one order of parameters"
    return rendered.text


def _pg_statement(delivery_id: uuid.UUID, partitioned: bool) -> str:
    return _pg_row_update(*_pg_target(delivery_id, partitioned))


# Outcomes without an event (a batch of SENT, mostly) go in one statement per table: the
# batch as arrays, joined to the rows by id. The fence (status SENDING, the claimed attempt)
# is a join condition on array columns, not a filter on the table: a planner that trusts
# statistics that saw no SENDING row (1 row estimated) would otherwise pick a nested loop
# that runs the arrays again for every row, quadratic in the batch (docs/benchmarks.md,
# notes). Joined on the key, it is one index scan by id and a hash join.
_SET_COLUMNS = (
    ("delivery_id", "uuid"),
    ("claimed_attempts", "integer"),
    ("status", "text"),
    ("attempts", "integer"),
    ("next_attempt_at", "timestamptz"),
    ("provider", "text"),
    ("provider_msg_id", "text"),
    ("last_error", "text"),
    ("failure_kind", "text"),
    ("skip_reason", "text"),
    ("sent_at", "timestamptz"),
    ("template_version", "integer"),
)
_set_values = operator.attrgetter(*(name for name, _ in _SET_COLUMNS))


@functools.lru_cache(maxsize=64)
def _pg_set_update(table: str, bounds: str) -> str:
    arrays = ", ".join(f"${n}::{kind}[]" for n, (_, kind) in enumerate(_SET_COLUMNS, 1))
    fence = len(_SET_COLUMNS) + 1
    now = fence + 1
    names = ", ".join(name for name, _ in _SET_COLUMNS)
    columns = ", ".join(f"{name} = u.{name}" for name in OUTCOME_COLUMNS)
    return f"""
WITH u AS MATERIALIZED (
    SELECT * FROM unnest({arrays}, ${fence}::text[]) AS u({names}, fence)
)
UPDATE {table} AS d
SET {columns}, lease_until = NULL, send_started_at = NULL, updated_at = ${now},
    template_version = COALESCE(u.template_version, d.template_version)
FROM u
WHERE d.id = ANY($1::uuid[]) AND d.id = u.delivery_id {bounds}
    AND d.status = u.fence AND d.attempts = u.claimed_attempts
"""


def _pg_set_statement(delivery_id: uuid.UUID, partitioned: bool) -> str:
    # Plain tables: one statement for the whole batch, whatever its days.
    if not partitioned:
        return _pg_set_update("delivery", "")
    return _pg_set_update(*_pg_target(delivery_id, partitioned))


def _pg_set_args(outcomes: Sequence[Outcome], now: datetime) -> list[Any]:
    """The arrays of ``_pg_set_update``, in its order (enums, being strings, as they are)."""
    columns = [list(column) for column in zip(*map(_set_values, outcomes), strict=True)]
    return [*columns, [Status.SENDING.value] * len(outcomes), now]


_INSERT_EVENT = for_asyncpg(sa.insert(delivery_event))


def _pg_row(outcome: Outcome, now: datetime) -> list[Any]:
    """The parameters of ``_pg_row_update``, in its order."""
    return _ASYNCPG_OUTCOME.args(_sa_params(outcome, now))


async def write_outcomes(db: Database, outcomes: Sequence[Outcome], now: datetime) -> None:
    """Write a batch of outcomes with their events and effects, all in one transaction.

    An outcome whose fence fails (its lease expired and the delivery was claimed again)
    changes nothing and leaves no event: the history shows only what took effect. On day
    partitions each outcome updates its delivery's day's partition by name.
    """
    if not outcomes:
        return
    partitioned = await _partitioned(db, now)
    try:
        await _write_batch(db, outcomes, now, partitioned)
    except Exception as error:
        if not (partitioned and _no_table(error)):
            raise
        # A delivery of a day dropped since (so not live: its outcome is fenced out), or
        # no delivery at all: the parent finds whatever is left to write.
        await _write_batch(db, outcomes, now, partitioned=False)


async def _write_batch(
    db: Database, outcomes: Sequence[Outcome], now: datetime, partitioned: bool
) -> None:
    if not any(o.effect for o in outcomes):
        await _write_quiet.of(db)(db, outcomes, now, partitioned)  # the hot path: no effects
        return
    await _write_with_effects(db, outcomes, now, partitioned)


async def _write_with_effects(
    db: Database, outcomes: Sequence[Outcome], now: datetime, partitioned: bool
) -> None:
    async with db.engine.begin() as conn:
        await _write(conn, outcomes, now, partitioned)
        await apply_effects(db, conn, outcomes, now)


async def _partitioned(db: Database, now: datetime) -> bool:
    """Whether outcomes name their day's partition (store/partition_days.py)."""
    return db.dialect.partitions and (await day_tables(db, now.astimezone(UTC).date())).partitioned


def _no_table(error: BaseException) -> bool:
    """Whether ``error`` is PostgreSQL's undefined_table, from asyncpg or SQLAlchemy."""
    found = getattr(error, "orig", error)
    return getattr(found, "sqlstate", None) == "42P01"


async def _write(
    conn: AsyncConnection, outcomes: Sequence[Outcome], now: datetime, partitioned: bool
) -> None:
    quiet: dict[sa.Update, list[dict[str, Any]]] = {}
    for outcome in (o for o in outcomes if not o.event):
        statement = _sa_statement(outcome.delivery_id, partitioned)
        quiet.setdefault(statement, []).append(_sa_params(outcome, now))
    for statement, rows in quiet.items():
        await conn.execute(statement, rows)
    events = []
    for outcome in (o for o in outcomes if o.event):  # the rarer path: failures
        statement = _sa_statement(outcome.delivery_id, partitioned)
        result = await conn.execute(statement, _sa_params(outcome, now))
        if result.rowcount == 1:
            events.append(_outcome_event(outcome, now))
    if events:
        await conn.execute(sa.insert(delivery_event), events)


async def _write_postgres(
    db: Database, outcomes: Sequence[Outcome], now: datetime, partitioned: bool
) -> None:
    quiet: dict[str, list[Outcome]] = {}
    for outcome in outcomes:
        if not outcome.event:
            statement = _pg_set_statement(outcome.delivery_id, partitioned)
            quiet.setdefault(statement, []).append(outcome)
    loud = [o for o in outcomes if o.event]
    async with db.asyncpg() as conn:
        # No transaction needed: after a failure the batch is written again, and rows already
        # written then fail their fence (no longer SENDING) and change nothing.
        for statement, group in quiet.items():
            await conn.execute(statement, *_pg_set_args(group, now))
        if not loud:
            return
        async with conn.transaction():
            events = [
                _outcome_event(o, now)
                for o in loud
                if await conn.fetchval(
                    _pg_statement(o.delivery_id, partitioned) + " RETURNING id",
                    *_pg_row(o, now),
                )
                is not None
            ]
            if events:
                await conn.executemany(
                    _INSERT_EVENT.text,
                    [_INSERT_EVENT.args({**e, "detail": json.dumps(e["detail"])}) for e in events],
                )


# SQLite: the batch's one transaction holds the write lock either way.
_write_quiet = Variants(postgres=_write_postgres, sqlite=_write_with_effects)


def _outcome_event(outcome: Outcome, now: datetime) -> dict[str, Any]:
    assert outcome.event is not None
    return event_row(outcome.delivery_id, outcome.event, now, outcome.event_detail)


@dataclass(slots=True, frozen=True)
class SendStart:
    """An attempt about to call an at-most-once account's provider: its fence and account."""

    delivery_id: uuid.UUID
    claimed_attempts: int
    account: str


# The start marks of a group, set-based as the quiet outcomes are (the fence a join
# condition on the arrays); RETURNING tells which fences held.
_PG_MARK = """
WITH s AS MATERIALIZED (
    SELECT * FROM unnest($1::uuid[], $2::integer[], $3::text[], $4::text[])
        AS s(delivery_id, claimed_attempts, provider, fence)
)
UPDATE {table} AS d
SET send_started_at = $5, provider = s.provider, updated_at = $5
FROM s
WHERE d.id = ANY($1::uuid[]) AND d.id = s.delivery_id {bounds}
    AND d.status = s.fence AND d.attempts = s.claimed_attempts
RETURNING d.id
"""


async def mark_sends_started(
    db: Database, starts: Sequence[SendStart], now: datetime
) -> set[uuid.UUID]:
    """Record that each attempt of ``starts`` is about to call its provider (and which
    account), fenced as an outcome is; the deliveries whose fence held. One whose fence
    failed is no longer this attempt's (its lease expired): it must not be sent."""
    if not starts:
        return set()
    partitioned = await _partitioned(db, now)
    try:
        return await _mark(db, starts, now, partitioned)
    except Exception as error:
        if not (partitioned and _no_table(error)):
            raise
        return await _mark(db, starts, now, partitioned=False)


async def _mark(
    db: Database, starts: Sequence[SendStart], now: datetime, partitioned: bool
) -> set[uuid.UUID]:
    return await _mark_in.of(db)(db, starts, now, partitioned)


async def _mark_postgres(
    db: Database, starts: Sequence[SendStart], now: datetime, partitioned: bool
) -> set[uuid.UUID]:
    groups: dict[tuple[str, str], list[SendStart]] = {}
    for start in starts:
        target = _pg_target(start.delivery_id, partitioned) if partitioned else ("delivery", "")
        groups.setdefault(target, []).append(start)
    marked: set[uuid.UUID] = set()
    async with db.asyncpg() as conn:
        for (table, bounds), group in groups.items():
            rows = await conn.fetch(
                _PG_MARK.format(table=table, bounds=bounds),
                [s.delivery_id for s in group],
                [s.claimed_attempts for s in group],
                [s.account for s in group],
                [Status.SENDING.value] * len(group),
                now,
            )
            marked.update(row["id"] for row in rows)
    return marked


async def _mark_sqlite(
    db: Database, starts: Sequence[SendStart], now: datetime, partitioned: bool
) -> set[uuid.UUID]:
    del partitioned  # never on SQLite
    marked: set[uuid.UUID] = set()
    async with db.engine.begin() as conn:
        for start in starts:
            statement = (
                sa.update(delivery)
                .where(
                    delivery.c.id == start.delivery_id,
                    delivery.c.status == Status.SENDING.value,
                    delivery.c.attempts == start.claimed_attempts,
                )
                .values(send_started_at=now, provider=start.account, updated_at=now)
                .returning(delivery.c.id)
            )
            marked.update(row.id for row in await conn.execute(statement))
    return marked


_mark_in = Variants(postgres=_mark_postgres, sqlite=_mark_sqlite)


async def reachable(db: Database) -> bool:
    """Whether the database answers at all: tells a refused batch from an unreachable one."""
    try:
        async with db.engine.connect() as conn:
            await conn.execute(sa.text("SELECT 1"))
    except Exception:
        return False
    return True
