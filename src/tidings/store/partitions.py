"""Day partitions on PostgreSQL, and retention in either layout (docs/architecture.md,
Retention and partitions).

``notification``, ``delivery`` and ``delivery_event`` sit on partitions by range of a UUID
v7 (``notification.id``, ``delivery.notification_id``, ``delivery_event.delivery_id``): one
partition per UTC day, bounded by the day's first millisecond in the top 48 bits. A new
PostgreSQL database starts on them: migration 0026 converts it (``convert_at_migration``),
and an existing one too while it is small; a larger one stays on plain tables until
``enable_partitions`` (`tidings partitions enable`) moves it in a maintenance window. On day
partitions, partitions are made ahead (``ensure_partitions``) and a day older than the
retention is detached CONCURRENTLY and dropped, unless one of its deliveries is still in
progress. On plain tables (SQLite, or PostgreSQL not converted) retention deletes the old
finished notifications in batches. ``is_partitioned`` is the one switch between the two.
"""

from __future__ import annotations

import functools
import logging
import re
import uuid
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.ids import day_bound
from tidings.states import Status
from tidings.store.dialects import Variants
from tidings.store.engine import Database
from tidings.store.log_retention import LogPruned, delete_in_batches, prune_log
from tidings.store.schema import (
    delivery,
    delivery_event,
    idempotency_key,
    metadata,
    notification,
)

log = logging.getLogger(__name__)

# Parent -> partition key, in creation order; days are detached in the reverse order.
PARTITIONED: dict[str, str] = {
    "notification": "id",
    "delivery": "notification_id",
    "delivery_event": "delivery_id",
}
_DAY_MS = 86_400_000
_MAX_MS = (1 << 48) - 1
_EPOCH = date(1970, 1, 1)
_NAME = re.compile(r"^(notification|delivery|delivery_event)_p(\d{8}|all)$")
# Serialises partition creation between processes (a fixed, arbitrary lock key).
_LOCK_KEY = 0x7469_6469_6E67_7301
_RETENTION_KEY = 0x7469_6469_6E67_7302
LIVE = (Status.PENDING.value, Status.SENDING.value, Status.QUEUED.value)
KEY_BATCH = 5_000
LIVE_CHUNK = 40  # days per statement of live_days
DELETE_BATCH = 1_000
# A conversion refuses a span of days beyond this: ids that are not UUID v7 would otherwise
# ask for a partition per day of some random millennium.
MAX_SPAN_DAYS = 3_660
# How long the conversion waits for its exclusive locks before giving up (a long query on
# the tables would otherwise queue every insert behind the waiting conversion).
LOCK_WAIT = "10s"
# Migration 0026 converts a database holding at most this many notifications (a few
# seconds' copy with their deliveries and events); a larger one would hold the three tables
# locked at a process's start for as long as its copy takes, so it stays plain until
# `tidings partitions enable` is run in a maintenance window.
MIGRATION_BOUND = 10_000
# Whether all three tables are partitioned (their names are constants: no parameter, so the
# same text runs on asyncpg and through SQLAlchemy).
_PARTITIONED_PARENTS = f"""
    SELECT count(*) FROM pg_partitioned_table p JOIN pg_class c ON c.oid = p.partrelid
    WHERE c.relname IN ({", ".join(f"'{table}'" for table in PARTITIONED)})
    AND pg_table_is_visible(c.oid)
"""


class PartitionsUnavailable(Exception):
    """The conversion cannot run on this database; the message says why."""


def day_of(value: uuid.UUID) -> date:
    """The UTC day a UUID v7 was made on."""
    return _EPOCH + timedelta(days=(value.int >> 80) // _DAY_MS)


@functools.lru_cache(maxsize=64)
def _days_around(day_number: int) -> tuple[uuid.UUID, uuid.UUID]:
    return uuid.UUID(int=((day_number - 1) * _DAY_MS) << 80), uuid.UUID(
        int=min((day_number + 2) * _DAY_MS, _MAX_MS) << 80
    )


def notification_days(delivery_id: uuid.UUID) -> tuple[uuid.UUID, uuid.UUID]:
    """Bounds of ``delivery.notification_id`` for a delivery: its own id's day, the day
    before and the day after (a delivery's id is made in its notification's millisecond;
    before that, within microseconds of it, on either side of a midnight at worst). A
    lookup by id with these bounds reads at most three days' partitions instead of probing
    every day's; on day partitions the hot paths name the one day instead
    (store/partition_days.py)."""
    return _days_around(max(1, (delivery_id.int >> 80) // _DAY_MS))


def partition_name(table: str, day: date) -> str:
    return f"{table}_p{day:%Y%m%d}"


def is_partition_name(name: str) -> bool:
    """Whether ``name`` is a partition made by this module (not a table of the models)."""
    return _NAME.match(name) is not None


def _day_from_name(name: str) -> date | None:
    match = _NAME.match(name)
    if match is None or match.group(2) == "all":
        return None
    return datetime.strptime(match.group(2), "%Y%m%d").replace(tzinfo=UTC).date()


def create_statements(table: str, day: date) -> list[str]:
    """A day's partition of ``table``, made as a plain table then attached: ATTACH takes a
    SHARE UPDATE EXCLUSIVE lock on the parent, CREATE TABLE ... PARTITION OF an exclusive
    one that would queue every insert behind any long query on the table. Attaching builds
    the parent's indexes on the (empty) new table."""
    name = partition_name(table, day)
    return [
        f"CREATE TABLE IF NOT EXISTS {name} "
        f"(LIKE {table} INCLUDING DEFAULTS INCLUDING CONSTRAINTS)",
        attach_statement(table, day),
    ]


def attach_statement(table: str, day: date) -> str:
    low, high = day_bound(day), day_bound(day + timedelta(days=1))
    name = partition_name(table, day)
    return f"ALTER TABLE {table} ATTACH PARTITION {name} FOR VALUES FROM ('{low}') TO ('{high}')"


def days_between(first: date, last: date) -> list[date]:
    return [first + timedelta(days=n) for n in range((last - first).days + 1)]


async def is_partitioned(db: Database) -> bool:
    """Whether this database's tables are on day partitions (migration 0026 or `tidings
    partitions enable`)."""
    if not db.dialect.partitions:
        return False
    async with db.asyncpg() as conn:
        found: int = await conn.fetchval(_PARTITIONED_PARENTS)
    return found == len(PARTITIONED)


def _is_partitioned(bind: sa.Connection) -> bool:
    """``is_partitioned`` on a PostgreSQL connection of SQLAlchemy's (a migration's)."""
    return bind.exec_driver_sql(_PARTITIONED_PARENTS).scalar() == len(PARTITIONED)


async def attached(conn: Any) -> dict[str, set[date]]:
    """The day partitions attached to each parent (asyncpg connection)."""
    rows = await conn.fetch(
        """
        SELECT parent.relname AS parent, child.relname AS child
        FROM pg_inherits i
        JOIN pg_class parent ON parent.oid = i.inhparent
        JOIN pg_class child ON child.oid = i.inhrelid
        WHERE parent.relname = ANY($1::text[]) AND pg_table_is_visible(parent.oid)
        """,
        list(PARTITIONED),
    )
    found: dict[str, set[date]] = {table: set() for table in PARTITIONED}
    for row in rows:
        day = _day_from_name(row["child"])
        if day is not None:
            found[row["parent"]].add(day)
    return found


async def ensure_partitions(db: Database, today: date, ahead: int) -> list[str]:
    """Make the partitions of ``today`` and the ``ahead`` days after it that are missing;
    returns their names. Safe to run from any number of processes at once: creation is
    serialised by an advisory lock and each process makes only what it finds missing."""
    if not await is_partitioned(db):
        return []
    made: list[str] = []
    async with db.asyncpg() as conn:
        for day in days_between(today, today + timedelta(days=ahead)):
            for table in PARTITIONED:
                async with conn.transaction():  # one partition per transaction: short locks
                    await conn.execute("SELECT pg_advisory_xact_lock($1)", _LOCK_KEY)
                    if day in (await attached(conn))[table]:
                        continue
                    for statement in create_statements(table, day):
                        await conn.execute(statement)
                    made.append(partition_name(table, day))
    if made:
        log.info("created partitions %s", ", ".join(made))
    return made


@dataclass(frozen=True)
class Conversion:
    """What ``enable_partitions`` made: the days (first to last) and the rows it copied."""

    first_day: date
    last_day: date
    rows: dict[str, int]


async def enable_partitions(db: Database, today: date, ahead: int) -> Conversion:
    """Move the three tables of a plain PostgreSQL database at head onto day partitions, in
    one transaction: rename them aside, create the partitioned ones with their indexes,
    make a partition per day from the oldest row's day to ``today + ahead``, copy the rows,
    drop the old tables. The tables are locked exclusively throughout (reads and writes
    wait): run it in a quiet moment."""
    if not db.dialect.partitions:
        raise PartitionsUnavailable(
            "day partitions need PostgreSQL; on SQLite retention deletes old rows in batches"
        )
    if await is_partitioned(db):
        raise PartitionsUnavailable("the database is already on day partitions")
    async with db.engine.begin() as conn:
        return await conn.run_sync(_convert, today, ahead)


def convert_at_migration(
    bind: sa.Connection, today: date, ahead: int, bound: int = MIGRATION_BOUND
) -> Conversion | None:
    """Migration 0026, in the migration's transaction: put a plain PostgreSQL database on
    day partitions as ``enable_partitions`` does, if it holds at most ``bound``
    notifications (counted up to ``bound + 1`` rows, not all). A larger one, one whose
    tables stay locked by others for ``LOCK_WAIT``, or one ``enable_partitions`` would
    refuse is left as it is, with a warning: every process may migrate as it starts, and
    the migration must complete there. Returns the conversion, or None."""
    if bind.dialect.name != "postgresql" or _is_partitioned(bind):
        return None
    found = bind.exec_driver_sql(
        f"SELECT count(*) FROM (SELECT FROM notification LIMIT {bound + 1}) AS n"
    ).scalar_one()
    if found > bound:
        log.warning(
            "the database holds more than %s notifications: the migration left notification, "
            "delivery and delivery_event on plain tables (converting them here would lock "
            "them while every row is copied). Run `tidings partitions enable` in a "
            "maintenance window to put them on day partitions; until then retention deletes "
            "old rows in batches",
            f"{bound:,}",
        )
        return None
    try:
        with bind.begin_nested():  # a refusal rolls back to here, the migration goes on
            return _convert(bind, today, ahead)
    except (PartitionsUnavailable, sa.exc.DBAPIError) as error:
        if isinstance(error, sa.exc.DBAPIError) and not _lock_not_available(error):
            raise
        log.warning(
            "the migration left notification, delivery and delivery_event on plain tables "
            "(%s). Run `tidings partitions enable` in a maintenance window to put them on "
            "day partitions; until then retention deletes old rows in batches",
            error
            if isinstance(error, PartitionsUnavailable)
            else f"other sessions held them locked for over {LOCK_WAIT}",
        )
        return None


def _lock_not_available(error: sa.exc.DBAPIError) -> bool:
    return getattr(error.orig, "sqlstate", None) == "55P03"  # lock_timeout ran out


def _convert(bind: sa.Connection, today: date, ahead: int) -> Conversion:
    tables = ", ".join(PARTITIONED)
    bind.exec_driver_sql(f"SET LOCAL lock_timeout = '{LOCK_WAIT}'")
    bind.exec_driver_sql(f"LOCK TABLE {tables} IN ACCESS EXCLUSIVE MODE")
    bind.exec_driver_sql("SET LOCAL lock_timeout = 0")  # held now: the copy may take long
    first, last = _day_span(bind, today, today + timedelta(days=ahead))
    triggers = _trigger_definitions(bind)
    present = {t: {c["name"] for c in sa.inspect(bind).get_columns(t)} for t in PARTITIONED}
    _set_old_tables_aside(bind)
    meta = _partitioned_tables()
    meta.create_all(bind)
    _drop_columns_not_yet_migrated(bind, meta, present)
    for day in days_between(first, last):
        for table in PARTITIONED:
            for statement in create_statements(table, day):
                bind.exec_driver_sql(statement)
    rows: dict[str, int] = {}
    for table in PARTITIONED:
        columns = ", ".join(c.name for c in meta.tables[table].columns if c.name in present[table])
        copied = bind.exec_driver_sql(
            f"INSERT INTO {table} ({columns}) SELECT {columns} FROM {table}_old"
        )
        rows[table] = copied.rowcount
    for table in reversed(PARTITIONED):
        bind.exec_driver_sql(f"DROP TABLE {table}_old")
    # After the copy: moving rows is no status change, the triggers must not see it.
    for definition in triggers:
        bind.exec_driver_sql(definition)
    bind.exec_driver_sql(f"ANALYZE {tables}")  # new partitions have no statistics yet
    log.info("moved onto day partitions %s to %s: %s", first, last, rows)
    return Conversion(first, last, rows)


def _drop_columns_not_yet_migrated(
    bind: sa.Connection, meta: sa.MetaData, present: dict[str, set[str]]
) -> None:
    """The new tables keep the columns the old ones had: run by migration 0026, the models
    may hold columns a later migration adds (it adds them to the partitioned tables).
    Dropped while the parents have no partition yet, which costs nothing."""
    for table in PARTITIONED:
        for column in meta.tables[table].columns:
            if column.name not in present[table]:
                bind.exec_driver_sql(f"ALTER TABLE {table} DROP COLUMN {column.name}")


def _trigger_definitions(bind: sa.Connection) -> list[str]:
    """The migrations' triggers on the three tables (the event feed's), as CREATE TRIGGER
    statements naming the table: dropping the old tables drops them, so they are made
    again on the partitioned ones (where row triggers reach every partition)."""
    rows = bind.exec_driver_sql(
        "SELECT pg_get_triggerdef(t.oid) FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
        "WHERE NOT t.tgisinternal AND c.relname IN ('notification', 'delivery', "
        "'delivery_event') AND pg_table_is_visible(c.oid) ORDER BY t.tgname"
    )
    return [str(row[0]) for row in rows]


def _partitioned_tables() -> sa.MetaData:
    """The models' three tables, each partitioned by range of its partition key."""
    meta = sa.MetaData(naming_convention=metadata.naming_convention)
    for table, key in PARTITIONED.items():
        copy = metadata.tables[table].to_metadata(meta)
        copy.dialect_kwargs["postgresql_partition_by"] = f"RANGE ({key})"
    return meta


def _day_span(bind: sa.Connection, today: date, last: date) -> tuple[date, date]:
    """The first and last day to partition: the rows' days (ids are UUID v7, so a table's
    smallest key is its oldest row), today and the days ahead."""
    found = [today, last]
    for table, key in PARTITIONED.items():
        for order in ("ASC", "DESC"):  # PostgreSQL has no min() of uuid
            value = bind.exec_driver_sql(
                f"SELECT {key} FROM {table} ORDER BY {key} {order} LIMIT 1"
            ).scalar()
            if value is not None:
                found.append(day_of(uuid.UUID(str(value))))
    first, last = min(found), max(found)
    if (last - first).days > MAX_SPAN_DAYS:
        raise PartitionsUnavailable(
            f"the rows span {first} to {last}: more than {MAX_SPAN_DAYS} days of partitions "
            "(are some ids not UUID v7?)"
        )
    return first, last


def _set_old_tables_aside(bind: sa.Connection) -> None:
    """Rename the three tables to ``*_old``, first freeing the constraint and index names
    the new ones take (the copy needs none of them)."""
    inspector = sa.inspect(bind)
    for table in reversed(PARTITIONED):
        for fk in inspector.get_foreign_keys(table):
            bind.exec_driver_sql(f'ALTER TABLE {table} DROP CONSTRAINT "{fk["name"]}"')
        for unique in inspector.get_unique_constraints(table):
            bind.exec_driver_sql(f'ALTER TABLE {table} DROP CONSTRAINT "{unique["name"]}"')
        primary = inspector.get_pk_constraint(table)["name"]
        bind.exec_driver_sql(f'ALTER TABLE {table} DROP CONSTRAINT "{primary}"')
    for table in PARTITIONED:
        for index in inspector.get_indexes(table):
            if not index.get("duplicates_constraint"):
                bind.exec_driver_sql(f'DROP INDEX "{index["name"]}"')
        bind.exec_driver_sql(f"ALTER TABLE {table} RENAME TO {table}_old")


@dataclass(frozen=True)
class PartitionStatus:
    """Whether the database is on day partitions, and each table's attached days."""

    partitioned: bool
    days: dict[str, list[date]]


async def partition_status(db: Database) -> PartitionStatus:
    if not await is_partitioned(db):
        return PartitionStatus(False, {})
    async with db.asyncpg() as conn:
        found = await attached(conn)
    return PartitionStatus(True, {table: sorted(days) for table, days in found.items()})


@dataclass
class RetentionReport:
    """What one retention pass did."""

    dropped_days: list[date] = field(default_factory=list)
    kept_days: list[date] = field(default_factory=list)  # old, but with live deliveries
    notifications_deleted: int = 0  # plain tables: deleted in batches
    keys_deleted: int = 0
    log: LogPruned = field(default_factory=LogPruned)  # events, webhook messages, marks


async def run_retention(
    db: Database, now: datetime, retention_days: int, idempotency_days: int
) -> RetentionReport:
    """Drop (on day partitions) the days older than ``retention_days`` whose deliveries are
    all final, or delete (plain tables) such notifications in batches; then the idempotency
    keys older than ``idempotency_days``, and the event log's rows older than the days."""
    report = RetentionReport()
    cutoff = now.astimezone(UTC).date() - timedelta(days=retention_days)
    if await is_partitioned(db):
        await _drop_old_days(db, cutoff, report)
    else:
        report.notifications_deleted = await _delete_old.of(db)(db, cutoff)
    report.keys_deleted = await prune_keys(db, now - timedelta(days=idempotency_days))
    report.log = await prune_log(db, cutoff)
    return report


async def _delete_once_in_fleet(db: Database, cutoff: date) -> int:
    """``delete_old_rows`` by one process at a time (every dispatcher runs retention hourly;
    two deleting the same rows would only wait on each other)."""
    async with db.asyncpg() as conn:
        if not await conn.fetchval("SELECT pg_try_advisory_lock($1)", _RETENTION_KEY):
            return 0
        try:
            return await delete_old_rows(db, cutoff)
        finally:
            await conn.execute("SELECT pg_advisory_unlock($1)", _RETENTION_KEY)


async def _drop_old_days(db: Database, cutoff: date, report: RetentionReport) -> None:
    async with db.asyncpg() as conn:
        # One pass at a time in the fleet: every dispatcher runs retention hourly.
        if not await conn.fetchval("SELECT pg_try_advisory_lock($1)", _RETENTION_KEY):
            return
        try:
            await _finish_interrupted(conn, cutoff)
            days = sorted(set().union(*(await attached(conn)).values()))
            for day in (d for d in days if d < cutoff):
                if await has_live(conn, partition_name("delivery", day)):
                    log.warning(
                        "partition day %s is past retention but holds deliveries still in "
                        "progress (scheduled ahead or retrying): kept until they finish",
                        day,
                    )
                    report.kept_days.append(day)
                elif await _drop_day(conn, day):
                    report.dropped_days.append(day)
                else:
                    report.kept_days.append(day)
        finally:
            await conn.execute("SELECT pg_advisory_unlock($1)", _RETENTION_KEY)


def _live(table: str) -> str:
    """Whether ``table`` holds a delivery in progress ($1: LIVE): two probes, each served
    by a partial index (ix_delivery_due, ix_delivery_lease)."""
    return (
        f"EXISTS (SELECT 1 FROM {table} WHERE status = 'PENDING') OR EXISTS "
        f"(SELECT 1 FROM {table} WHERE lease_until IS NOT NULL AND status = ANY($1))"
    )


async def has_live(conn: Any, table: str) -> bool:
    """Whether the delivery table ``table`` (attached or not) holds a delivery in progress;
    False when it is gone (a drop interrupted after it)."""
    if await conn.fetchval("SELECT to_regclass($1)", table) is None:
        return False
    return bool(await conn.fetchval(f"SELECT {_live(table)}", list(LIVE)))


async def live_days(conn: Any, days: Collection[date]) -> set[date]:
    """Those of ``days`` whose delivery partition holds a delivery in progress (asyncpg
    ``conn``), ``LIVE_CHUNK`` days per statement: one round trip for a month of days, and
    never the locks of more than 40 days' tables and indexes at once. Raises
    UndefinedTableError if one is not there."""
    ordered = sorted(days)
    found: set[date] = set()
    for start in range(0, len(ordered), LIVE_CHUNK):
        chunk = ordered[start : start + LIVE_CHUNK]
        probes = " UNION ALL ".join(
            f"SELECT {n} AS n WHERE {_live(partition_name('delivery', day))}"
            for n, day in enumerate(chunk)
        )
        found.update(chunk[row["n"]] for row in await conn.fetch(probes, list(LIVE)))
    return found


async def _drop_day(conn: Any, day: date) -> bool:
    """Detach a day (CONCURRENTLY: inserts and updates of other days never wait), then drop
    it. A delivery made live again in between (a dead-letter replay) puts the day back."""
    for table in reversed(PARTITIONED):
        name = partition_name(table, day)
        await conn.execute(f"ALTER TABLE {table} DETACH PARTITION {name} CONCURRENTLY")
    if await has_live(conn, partition_name("delivery", day)):
        for table in PARTITIONED:
            await conn.execute(attach_statement(table, day))
        return False
    for table in reversed(PARTITIONED):
        await conn.execute(f"DROP TABLE {partition_name(table, day)}")
    log.info("dropped partition day %s", day)
    return True


async def _finish_interrupted(conn: Any, cutoff: date) -> None:
    """A detach interrupted between its two transactions leaves the partition 'detach
    pending'; a crash between detach and drop leaves detached day tables. Finish the
    detach, then drop such a day if it is past retention and idle, else attach it back."""
    pending = await conn.fetch(
        """
        SELECT parent.relname AS parent, child.relname AS child
        FROM pg_inherits i
        JOIN pg_class parent ON parent.oid = i.inhparent
        JOIN pg_class child ON child.oid = i.inhrelid
        WHERE i.inhdetachpending AND parent.relname = ANY($1::text[])
        """,
        list(PARTITIONED),
    )
    for row in pending:
        await conn.execute(f"ALTER TABLE {row['parent']} DETACH PARTITION {row['child']} FINALIZE")
    rows = await conn.fetch(
        "SELECT relname FROM pg_class "
        "WHERE relkind = 'r' AND NOT relispartition AND pg_table_is_visible(oid)"
    )
    loose = {(m.group(1), _day_from_name(m.group(0))) for m in map(_NAME.match, _names(rows)) if m}
    for table, day in sorted((t, d) for t, d in loose if d is not None):
        idle = not await has_live(conn, partition_name("delivery", day))
        if day < cutoff and idle:
            await conn.execute(f"DROP TABLE {partition_name(table, day)}")
        else:
            await conn.execute(attach_statement(table, day))


def _names(rows: list[Any]) -> list[str]:
    return [str(row["relname"]) for row in rows]


async def prune_keys(db: Database, before: datetime, batch: int = KEY_BATCH) -> int:
    """Delete idempotency keys made before ``before``, ``batch`` per transaction (short
    locks, bounded WAL). A key deleted can be used again: it makes a new notification."""
    expired = (
        sa.select(idempotency_key.c.namespace, idempotency_key.c.idempotency_key)
        .where(idempotency_key.c.created_at < before)
        .limit(batch)
    )
    statement = sa.delete(idempotency_key).where(
        sa.tuple_(idempotency_key.c.namespace, idempotency_key.c.idempotency_key).in_(
            expired.scalar_subquery()
        )
    )
    return await delete_in_batches(db, statement, batch)


async def delete_old_rows(db: Database, cutoff: date, batch: int = DELETE_BATCH) -> int:
    """Without partitions (SQLite, or PostgreSQL not converted): delete the notifications
    made before ``cutoff`` whose deliveries are all final, with their deliveries and events,
    ``batch`` notifications per transaction. Returns how many notifications were deleted."""
    bound = day_bound(cutoff)
    after = uuid.UUID(int=0)
    total = 0
    while True:
        async with db.engine.begin() as conn:
            page = await _old_page(conn, after, bound, batch)
            if not page:
                return total
            after = page[-1][0]
            ids = [row_id for row_id, finished in page if finished]
            if ids:
                await _delete_notifications(conn, ids)
            total += len(ids)


# Plain tables: SQLite has one process writing at a time anyway.
_delete_old = Variants(postgres=_delete_once_in_fleet, sqlite=delete_old_rows)


async def _old_page(
    conn: AsyncConnection, after: uuid.UUID, bound: uuid.UUID, batch: int
) -> list[tuple[uuid.UUID, bool]]:
    """The next ``batch`` old notifications by id, each with whether all its deliveries are
    final (the live ones are stepped over, not deleted)."""
    live = (
        sa.select(delivery.c.id)
        .where(delivery.c.notification_id == notification.c.id, delivery.c.status.in_(LIVE))
        .exists()
    )
    query = (
        sa.select(notification.c.id, ~live)
        .where(notification.c.id > after, notification.c.id < bound)
        .order_by(notification.c.id)
        .limit(batch)
    )
    return [(row[0], bool(row[1])) for row in await conn.execute(query)]


async def _delete_notifications(conn: AsyncConnection, ids: list[uuid.UUID]) -> None:
    # No foreign keys cascade (day partitions could have none): children first, explicitly.
    deliveries = sa.select(delivery.c.id).where(delivery.c.notification_id.in_(ids))
    await conn.execute(
        sa.delete(delivery_event).where(delivery_event.c.delivery_id.in_(deliveries))
    )
    await conn.execute(sa.delete(delivery).where(delivery.c.notification_id.in_(ids)))
    await conn.execute(sa.delete(notification).where(notification.c.id.in_(ids)))
