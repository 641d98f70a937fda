"""Day partitions (PostgreSQL, where `tidings migrate` puts a new database), retention in
both layouts on both databases, the migrations to 0017 and 0026 and the conversion onto
day partitions (docs/architecture.md, Retention and partitions)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from tests.helpers import eventually
from tidings.clock import utcnow
from tidings.priorities import Priority
from tidings.states import Status
from tidings.store import partitions
from tidings.store.engine import Database, connect
from tidings.store.intake import (
    Accepted,
    DeliveryDraft,
    KeyConflict,
    NotificationDraft,
    accept,
)
from tidings.store.partitions import (
    day_bound,
    enable_partitions,
    ensure_partitions,
    is_partitioned,
    partition_name,
    run_retention,
)
from tidings.store.schema import delivery, delivery_event, idempotency_key, notification


def v7_at(at: datetime) -> uuid.UUID:
    """A UUID v7 made at ``at``: its millisecond in the top 48 bits, random bits after."""
    ms = int(at.timestamp() * 1000)
    rand = secrets.randbits(74)
    rand_a, rand_b = rand >> 62, rand & ((1 << 62) - 1)
    return uuid.UUID(int=(ms << 80) | (0x7 << 76) | (rand_a << 64) | (0b10 << 62) | rand_b)


def draft(
    at: datetime,
    key: str,
    status: Status = Status.SKIPPED,
    request_hash: str = "h",
    *,
    delivery_at: datetime | None = None,
    send_at: datetime | None = None,
) -> NotificationDraft:
    """A notification made at ``at`` with one email delivery in ``status`` (its id made at
    ``delivery_at``, the same by default), due at ``send_at``."""
    item = DeliveryDraft(v7_at(delivery_at or at), "email", f"{key}@example.com", status)
    if status is Status.SKIPPED:
        item.skip_reason = "suppressed"
    return NotificationDraft(
        id=v7_at(at),
        namespace="default",
        idempotency_key=key,
        request_hash=request_hash,
        type="order.confirmed",
        category="transactional",
        priority=Priority.NORMAL,
        user_id=None,
        data={},
        locale=None,
        send_at=send_at,
        deliveries=[item],
    )


@pytest.fixture
async def pg(pg_database_url: str) -> AsyncIterator[Database]:
    """A PostgreSQL database at head: on day partitions, as migrated."""
    db = connect(pg_database_url)
    yield db
    await db.dispose()


async def where_is(db: Database, table: str, key: str, value: uuid.UUID) -> str:
    async with db.asyncpg() as conn:
        found: str = await conn.fetchval(
            f"SELECT tableoid::regclass::text FROM {table} WHERE {key} = $1", value
        )
    return found


async def count(db: Database, table: sa.Table) -> int:
    async with db.engine.connect() as conn:
        return int((await conn.execute(sa.select(sa.func.count()).select_from(table))).scalar_one())


async def add_events(db: Database, at: datetime) -> None:
    """One history event per delivery made on ``at``'s day."""
    low, high = day_bound(at.date()), day_bound(at.date() + timedelta(days=1))
    async with db.engine.begin() as conn:
        rows = await conn.execute(
            sa.select(delivery.c.id).where(delivery.c.notification_id.between(low, high))
        )
        events = [
            {"id": v7_at(at), "delivery_id": row.id, "kind": "note", "at": at, "detail": None}
            for row in rows
        ]
        if events:
            await conn.execute(sa.insert(delivery_event), events)


async def test_partitions_are_made_ahead_and_again_harmlessly(pg: Database) -> None:
    today = utcnow().date()
    async with pg.asyncpg() as conn:
        found = await partitions.attached(conn)
    expected = set(partitions.days_between(today, today + timedelta(days=7)))
    assert all(expected <= days for days in found.values()), found
    # Two processes making the same partitions at once: one makes each, nobody fails.
    other = connect(pg.url.render_as_string(False))
    try:
        made = await asyncio.gather(
            ensure_partitions(pg, today, 9), ensure_partitions(other, today, 9)
        )
    finally:
        await other.dispose()
    names = sorted(made[0] + made[1])
    later = [today + timedelta(days=8), today + timedelta(days=9)]
    assert names == sorted(partition_name(t, d) for t in partitions.PARTITIONED for d in later)
    assert await ensure_partitions(pg, today, 9) == []


async def test_a_notification_lands_in_its_day(pg: Database) -> None:
    now = utcnow()
    old = now - timedelta(days=3)
    await ensure_partitions(pg, old.date(), 0)
    for at in (now, old):
        item = draft(at, f"key-{at.date()}", Status.PENDING)
        [result] = await accept(pg, [item], at)
        assert isinstance(result, Accepted) and not result.replayed
        day = at.date()
        assert await where_is(pg, "notification", "id", item.id) == partition_name(
            "notification", day
        )
        assert await where_is(pg, "delivery", "notification_id", item.id) == partition_name(
            "delivery", day
        )


async def test_a_key_is_unique_across_day_partitions(pg: Database) -> None:
    now = utcnow()
    old = now - timedelta(days=5)
    await ensure_partitions(pg, old.date(), 0)
    first = draft(old, "order-77", Status.PENDING)
    await accept(pg, [first], old)
    # Today's retry of the same request: its new id would land in today's partition, where
    # a unique index on notification could never see the old day's row.
    [replay] = await accept(pg, [draft(now, "order-77", Status.PENDING)], now)
    assert isinstance(replay, Accepted) and replay.replayed
    assert replay.notification_id == first.id
    assert [d.id for d in replay.deliveries] == [first.deliveries[0].id]
    [conflict] = await accept(pg, [draft(now, "order-77", request_hash="other")], now)
    assert isinstance(conflict, KeyConflict) and conflict.notification_id == first.id
    async with pg.engine.connect() as conn:
        stored = await conn.execute(
            sa.select(sa.func.count()).where(notification.c.idempotency_key == "order-77")
        )
        assert stored.scalar_one() == 1
    assert await count(pg, delivery) == 1


async def test_retention_drops_finished_days_and_keeps_live_ones(pg: Database) -> None:
    now = utcnow()
    finished_day, live_day = now - timedelta(days=40), now - timedelta(days=35)
    recent = now - timedelta(days=2)
    for at in (finished_day, live_day, recent):
        await ensure_partitions(pg, at.date(), 0)
    await accept(pg, [draft(finished_day, f"f{n}") for n in range(20)], finished_day)
    live = [draft(live_day, "live-0", Status.PENDING), draft(live_day, "done-0")]
    await accept(pg, live, live_day)
    await accept(pg, [draft(recent, "recent")], recent)
    for at in (finished_day, live_day):
        await add_events(pg, at)

    report = await run_retention(pg, now, retention_days=30, idempotency_days=7)

    assert report.dropped_days == [finished_day.date()]
    assert report.kept_days == [live_day.date()]
    async with pg.asyncpg() as conn:
        for table in partitions.PARTITIONED:
            assert (
                await conn.fetchval("SELECT to_regclass($1)", f"{table}_p{finished_day:%Y%m%d}")
                is None
            )
            assert await conn.fetchval("SELECT to_regclass($1)", f"{table}_p{live_day:%Y%m%d}")
    assert await count(pg, notification) == 3  # the live day's two and the recent one
    assert await count(pg, delivery_event) == 2
    # Keys older than idempotency_days are gone (the recent one is 2 days old: kept).
    assert report.keys_deleted == 22
    assert await count(pg, idempotency_key) == 1
    again = await run_retention(pg, now, retention_days=30, idempotency_days=7)
    assert again.dropped_days == [] and again.kept_days == [live_day.date()]


async def test_expired_keys_are_pruned_in_batches_then_usable_again(pg: Database) -> None:
    now = utcnow()
    old = now - timedelta(days=8)
    await ensure_partitions(pg, old.date(), 0)
    await accept(pg, [draft(old, f"k{n}") for n in range(10)], old)
    await accept(pg, [draft(now, "fresh")], now)
    deleted = await partitions.prune_keys(pg, now - timedelta(days=7), batch=3)
    assert deleted == 10
    assert await count(pg, idempotency_key) == 1
    # After its window a key makes a new notification (documented in README).
    [result] = await accept(pg, [draft(now, "k0")], now)
    assert isinstance(result, Accepted) and not result.replayed


@pytest.fixture(params=["sqlite", "postgresql"])
async def plain(request: pytest.FixtureRequest, sqlite_copy: Path) -> AsyncIterator[Database]:
    """A database at head on plain tables: SQLite, or PostgreSQL not converted."""
    if request.param == "sqlite":
        url = f"sqlite:///{sqlite_copy}"
    else:
        url = request.getfixturevalue("pg_plain_database_url")
    db = connect(url)
    assert not await is_partitioned(db)
    yield db
    await db.dispose()


async def test_plain_retention_deletes_finished_notifications_in_batches(
    plain: Database,
) -> None:
    db = plain
    now = utcnow()
    old = now - timedelta(days=31)
    finished = [draft(old, f"old-{n}") for n in range(7)]
    await accept(db, [*finished, draft(old, "old-live", Status.PENDING)], old)
    await accept(db, [draft(now, "new")], now)
    await add_events(db, old)
    deleted = await partitions.delete_old_rows(db, now.date() - timedelta(days=30), batch=3)
    assert deleted == 7
    assert await count(db, notification) == 2
    assert await count(db, delivery) == 2
    assert await count(db, delivery_event) == 1  # the live delivery's


async def test_plain_retention_pass_deletes_and_makes_no_partitions(plain: Database) -> None:
    """The whole pass on plain tables: batched deletes and key pruning, no partition made
    (ensure_partitions is a no-op there), nothing dropped."""
    db = plain
    now = utcnow()
    old = now - timedelta(days=40)
    await accept(db, [draft(old, f"o{n}") for n in range(5)], old)
    await accept(db, [draft(old, "still-live", Status.PENDING), draft(now, "recent")], now)
    assert await ensure_partitions(db, now.date(), 7) == []
    report = await run_retention(db, now, retention_days=30, idempotency_days=7)
    assert report.notifications_deleted == 5
    assert report.dropped_days == [] and report.kept_days == []
    assert report.keys_deleted == 5  # the recent two were made now
    assert await count(db, notification) == 2
    assert await count(db, idempotency_key) == 2
    if db.dialect.partitions:
        async with db.asyncpg() as conn:
            assert await partitions.attached(conn) == {t: set() for t in partitions.PARTITIONED}


def _env(database_url: str) -> dict[str, str]:
    from tests.processes import tidings_env

    return tidings_env(database_url=database_url)


# The migration onto partitions: a database at the previous head with rows in it.


async def _rows_at_0016(db: Database, days: list[datetime]) -> list[NotificationDraft]:
    """Notifications (each with a delivery and an event) inserted through the 0016 schema,
    whose columns are today's; returns them."""
    made = [
        draft(at, f"m-{n}", Status.PENDING if n == 0 else Status.SKIPPED)
        for n, at in enumerate(days)
    ]
    async with db.engine.begin() as conn:
        for item in made:
            at = datetime.fromtimestamp((item.id.int >> 80) / 1000, UTC)
            await conn.execute(
                sa.insert(notification).values(
                    id=item.id,
                    namespace=item.namespace,
                    idempotency_key=item.idempotency_key,
                    request_hash=item.request_hash,
                    type=item.type,
                    category=item.category,
                    priority=item.priority.value,
                    data={},
                    created_at=at,
                )
            )
            sent = item.deliveries[0]
            await conn.execute(
                sa.insert(delivery).values(
                    id=sent.id,
                    notification_id=item.id,
                    channel="email",
                    address=sent.address,
                    priority="NORMAL",
                    category="transactional",
                    status=sent.status.value,
                    attempts=0,
                    next_attempt_at=at,
                    created_at=at,
                    updated_at=at,
                )
            )
            event = {"id": v7_at(at), "delivery_id": sent.id, "kind": "note", "at": at}
            await conn.execute(sa.insert(delivery_event).values(event))
    return made


@contextlib.asynccontextmanager
async def new_pg_database() -> AsyncIterator[str]:
    """An empty PostgreSQL database (no schema); its URL."""
    from tests.conftest import pg_admin, pg_url

    name = f"tidings_mig_{uuid.uuid4().hex[:12]}"
    await pg_admin(f"CREATE DATABASE {name}")
    try:
        yield pg_url(name)
    finally:
        await pg_admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture(params=["sqlite", "postgresql"])
async def empty_db(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Database]:
    if request.param == "sqlite":
        db = connect(f"sqlite:///{tmp_path / 'old.db'}")
        yield db
        await db.dispose()
        return
    async with new_pg_database() as url:
        db = connect(url)
        try:
            yield db
        finally:
            await db.dispose()


async def test_migration_keeps_rows_on_plain_tables(empty_db: Database) -> None:
    from tidings.store.migrate import upgrade

    db = empty_db
    await upgrade(db, "0016")
    now = utcnow()
    made = await _rows_at_0016(db, [now - timedelta(days=12), now - timedelta(days=3), now])
    await upgrade(db, day_partitions=False)  # 0017 onwards, on plain tables
    assert not await is_partitioned(db)
    assert await count(db, notification) == 3
    assert await count(db, delivery) == 3
    assert await count(db, delivery_event) == 3
    assert await count(db, idempotency_key) == 3
    await _keys_answer(db, made, now)
    # New notifications still go in, and the schema is the models' (test_migrations too).
    [fresh] = await accept(db, [draft(now, "after-migration", Status.PENDING)], now)
    assert isinstance(fresh, Accepted) and not fresh.replayed
    if not db.dialect.partitions:
        return
    # Then onto day partitions: every row moved into its day.
    done = await enable_partitions(db, now.date(), 7)
    assert done.first_day == (now - timedelta(days=12)).date()
    assert done.rows == {"notification": 4, "delivery": 4, "delivery_event": 3}
    day: date = (now - timedelta(days=12)).date()
    assert await where_is(db, "notification", "id", made[0].id) == partition_name(
        "notification", day
    )
    assert await where_is(db, "delivery_event", "delivery_id", made[0].deliveries[0].id) == (
        partition_name("delivery_event", day)
    )
    await _keys_answer(db, made, now)


async def _keys_answer(db: Database, made: list[NotificationDraft], now: datetime) -> None:
    """Each key still answers with its stored notification."""
    for item in made:
        [replay] = await accept(db, [draft(now, item.idempotency_key)], now)
        assert isinstance(replay, Accepted) and replay.replayed
        assert replay.notification_id == item.id


async def _triggers(db: Database) -> list[tuple[str, str]]:
    """The non-internal triggers on the three tables' parents: (table, trigger)."""
    async with db.asyncpg() as conn:
        rows = await conn.fetch(
            "SELECT c.relname, t.tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
            "WHERE NOT t.tgisinternal AND NOT c.relispartition "
            "AND c.relname = ANY($1::text[]) ORDER BY 1, 2",
            list(partitions.PARTITIONED),
        )
    return [(row[0], row[1]) for row in rows]


# Migration 0026: PostgreSQL databases onto day partitions by default.


async def _downgrade(db: Database, revision: str) -> None:
    from alembic import command

    from tidings.store.migrate import alembic_config

    def run(connection: sa.Connection) -> None:
        command.downgrade(alembic_config(connection), revision)

    async with db.engine.begin() as conn:
        await conn.run_sync(run)


async def test_dispatchers_maintenance_on_a_new_database(
    pg: Database, caplog: pytest.LogCaptureFixture
) -> None:
    """The hourly pass (here every 10 ms) on a database as `tidings migrate` leaves it:
    makes the days ahead, drops nothing, and the claims read it as on day partitions."""
    from tidings.background.retention import RetentionPlan, maintain_every
    from tidings.store import partition_days

    today = utcnow().date()
    plan = RetentionPlan(retention_days=30, idempotency_days=7, partitions_ahead=9, interval=0.01)
    stop = asyncio.Event()
    with caplog.at_level(logging.INFO):
        task = asyncio.create_task(maintain_every(plan, pg, stop))
        try:

            async def made_ahead() -> bool:
                async with pg.asyncpg() as conn:
                    found = await partitions.attached(conn)
                return all(today + timedelta(days=9) in days for days in found.values())

            await eventually(made_ahead)
        finally:
            stop.set()
            await task
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
    assert (await partition_days.day_tables(pg, today)).partitioned


async def test_migration_0026_moves_a_small_database_onto_day_partitions(
    empty_db: Database,
) -> None:
    """An existing database under the bound, at 0025: the migration moves every row into
    its day (PostgreSQL); on SQLite it changes nothing. Downgrading leaves the partitions,
    and migrating again leaves them as they are."""
    from tidings.store.migrate import upgrade

    db = empty_db
    await upgrade(db, "0025")
    now = utcnow()
    days = [now - timedelta(days=12), now - timedelta(days=3), now]
    made = [draft(at, f"small-{n}", Status.PENDING) for n, at in enumerate(days)]
    for item, at in zip(made, days, strict=True):
        await accept(db, [item], at)
        await add_events(db, at)
    triggers = await _triggers(db) if db.dialect.name == "postgresql" else []
    await upgrade(db)
    assert await is_partitioned(db) == db.dialect.partitions
    for table in (notification, delivery, delivery_event, idempotency_key):
        assert await count(db, table) == 3
    await _keys_answer(db, made, now)
    if not db.dialect.partitions:
        return
    assert await _triggers(db) == triggers
    for item, at in zip(made, days, strict=True):
        assert await where_is(db, "notification", "id", item.id) == partition_name(
            "notification", at.date()
        )
        assert await where_is(db, "delivery_event", "delivery_id", item.deliveries[0].id) == (
            partition_name("delivery_event", at.date())
        )
    async with db.asyncpg() as conn:
        found = await partitions.attached(conn)
    expected = set(partitions.days_between(days[0].date(), now.date() + timedelta(days=7)))
    assert found == {table: expected for table in partitions.PARTITIONED}
    await _downgrade(db, "0025")
    assert await is_partitioned(db)
    await upgrade(db)
    async with db.asyncpg() as conn:
        assert await partitions.attached(conn) == found
    assert await count(db, delivery) == 3


async def test_migration_0026_completes_when_the_tables_stay_locked(
    pg_plain_database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A small database whose tables another session holds past the conversion's lock wait
    (shortened here from 10 s): the conversion rolls back to its savepoint, the migration
    completes on plain tables and says what to run."""
    import asyncpg

    from tidings.store.migrate import current_revision, upgrade

    monkeypatch.setattr(partitions, "LOCK_WAIT", "200ms")
    db = connect(pg_plain_database_url)
    reader = await asyncpg.connect(pg_plain_database_url)
    try:
        await _downgrade(db, "0025")
        now = utcnow()
        await accept(db, [draft(now, "locked-out")], now)
        reader_transaction = reader.transaction()
        await reader_transaction.start()
        await reader.fetch("SELECT id FROM delivery")  # holds its ACCESS SHARE lock
        with caplog.at_level(logging.WARNING, logger="tidings.store.partitions"):
            await upgrade(db, "0026")  # a later migration's ALTER would wait for the reader
        await reader_transaction.rollback()
        assert "held them locked for over 200ms" in caplog.text
        assert "`tidings partitions enable`" in caplog.text
        assert await current_revision(db) == "0026"
        assert not await is_partitioned(db)
        assert await count(db, delivery) == 1
    finally:
        await reader.close()
        await db.dispose()


async def test_claims_and_outcomes_find_rows_of_an_old_day(pg: Database) -> None:
    """A notification scheduled from an old day: claimed and written back in its day."""
    from tidings.store.claims import claim_due
    from tidings.store.outcomes import Outcome, write_outcomes

    now = utcnow()
    old = now - timedelta(days=20)
    await ensure_partitions(pg, old.date(), 0)
    item = draft(old, "scheduled-long-ago", Status.PENDING)
    await accept(pg, [item], old)
    [claimed] = await claim_due(pg, Priority.NORMAL, 10, now, now + timedelta(seconds=60))
    assert claimed.id == item.deliveries[0].id
    outcome = Outcome(delivery_id=claimed.id, claimed_attempts=1, status=Status.SENT, attempts=1)
    await write_outcomes(pg, [outcome], now)
    async with pg.asyncpg() as conn:
        status = await conn.fetchval("SELECT status FROM delivery WHERE id = $1", claimed.id)
    assert status == "SENT"


def test_uuid_bounds() -> None:
    day = date(2026, 3, 1)
    at = datetime(2026, 3, 1, 23, 59, 59, 999000, tzinfo=UTC)
    value = v7_at(at)
    assert day_bound(day) <= value < day_bound(day + timedelta(days=1))
    assert partitions.day_of(value) == day
    low, high = partitions.notification_days(value)
    assert low == day_bound(day - timedelta(days=1))
    assert high == day_bound(day + timedelta(days=2))
