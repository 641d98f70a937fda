"""Day partitions through the `tidings` commands, run as processes (migrate, partitions
enable, retention); the partitions' other tests are in tests/integration/test_partitions.py."""

from __future__ import annotations

import asyncio
import sys
from datetime import timedelta
from pathlib import Path

from tests.integration.test_partitions import (
    _downgrade,
    _env,
    _triggers,
    add_events,
    count,
    draft,
    new_pg_database,
)
from tidings.clock import utcnow
from tidings.states import Status
from tidings.store import partitions
from tidings.store.engine import connect
from tidings.store.intake import (
    Accepted,
    accept,
)
from tidings.store.migrate import head_revision
from tidings.store.partitions import (
    is_partitioned,
)
from tidings.store.schema import delivery, delivery_event, idempotency_key, notification


def _python_tidings(*args: str) -> list[str]:
    return [sys.executable, "-m", "tidings", *args]


async def _tidings(url: str, *args: str) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        *_python_tidings(*args),
        env=_env(url),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await process.communicate()
    assert process.returncode is not None
    return process.returncode, output.decode()


async def test_migration_0026_leaves_a_large_database_plain(pg_plain_database_url: str) -> None:
    """Over the bound (counted, not converted: a process migrating as it starts would hold
    the tables locked for the copy), `tidings migrate` completes, warns and says what to
    run; the rows are today's UUID v7s, which a conversion would have taken."""
    url = pg_plain_database_url
    db = connect(url)
    try:
        await _downgrade(db, "0025")  # nothing to undo on plain tables
        async with db.asyncpg() as conn:
            await conn.execute(
                "INSERT INTO notification (id, namespace, idempotency_key, request_hash, type, "
                "category, priority, data, created_at) SELECT (lpad(to_hex((extract(epoch FROM "
                "now()) * 1000)::bigint), 12, '0') || '7' || substr(md5(n::text), 1, 19))::uuid, "
                "'default', 'bulk-' || n, 'h', 'order.confirmed', 'transactional', 'NORMAL', "
                "'{}', now() FROM generate_series(1, $1) AS n",
                partitions.MIGRATION_BOUND + 1,
            )
        code, output = await _tidings(url, "migrate")
        assert code == 0 and f"schema at revision {head_revision()}" in output, output
        assert "more than 10,000 notifications" in output, output
        assert "Run `tidings partitions enable` in a maintenance window" in output, output
        assert "plain tables, not day partitions" in output, output
        assert not await is_partitioned(db)
        assert await count(db, notification) == partitions.MIGRATION_BOUND + 1
    finally:
        await db.dispose()


async def test_tidings_migrate_puts_a_new_database_on_day_partitions() -> None:
    async with new_pg_database() as url:
        code, output = await _tidings(url, "migrate")
        today = utcnow().date()
        ahead = partitions.days_between(today, today + timedelta(days=7))
        assert code == 0 and f"schema at revision {head_revision()}" in output, output
        assert f"day partitions {today} to {ahead[-1]}" in output, output
        db = connect(url)
        try:
            assert await is_partitioned(db)
            async with db.asyncpg() as conn:
                assert await partitions.attached(conn) == {
                    t: set(ahead) for t in partitions.PARTITIONED
                }
            assert await _triggers(db)  # the event feed's, on the partitioned parents
        finally:
            await db.dispose()


async def test_tidings_partitions_enable_keeps_every_row(pg_plain_database_url: str) -> None:
    pg_database_url = pg_plain_database_url
    db = connect(pg_database_url)
    now = utcnow()
    days = [now - timedelta(days=back) for back in (9, 2, 0)]
    try:
        for at in days:
            await accept(db, [draft(at, f"{at:%d}-{n}") for n in range(4)], at)
            await add_events(db, at)
        code, output = await _tidings(pg_database_url, "partitions", "status")
        assert code == 0 and "not partitioned" in output, output
        triggers = await _triggers(db)
        code, output = await _tidings(pg_database_url, "partitions", "enable")
        assert code == 0, output
        assert "rows copied: notification 12, delivery 12, delivery_event 12" in output
        assert await is_partitioned(db)
        assert await _triggers(db) == triggers  # the migrations' triggers made again
        for table in (notification, delivery, delivery_event, idempotency_key):
            assert await count(db, table) == 12
        [replay] = await accept(db, [draft(now, f"{days[0]:%d}-1")], now)
        assert isinstance(replay, Accepted) and replay.replayed
        code, output = await _tidings(pg_database_url, "partitions", "status")
        assert code == 0 and "partitioned by day" in output, output
        expected = partitions.days_between(days[0].date(), now.date() + timedelta(days=7))
        assert f"notification: {len(expected)} days, {expected[0]} to {expected[-1]}" in output
        code, output = await _tidings(pg_database_url, "partitions", "enable")
        assert code == 1 and "already on day partitions" in output, output
    finally:
        await db.dispose()


async def test_tidings_partitions_enable_refuses_sqlite(sqlite_copy: Path) -> None:
    code, output = await _tidings(f"sqlite:///{sqlite_copy}", "partitions", "enable")
    assert code == 1 and "need PostgreSQL" in output, output
    code, output = await _tidings(f"sqlite:///{sqlite_copy}", "partitions", "status")
    assert code == 0 and "not partitioned" in output, output


async def test_tidings_retention_command_on_sqlite(sqlite_copy: Path) -> None:
    path = sqlite_copy
    db = connect(f"sqlite:///{path}")
    now = utcnow()
    old = now - timedelta(days=45)
    try:
        await accept(db, [draft(old, f"old-{n}") for n in range(5)], old)
        await accept(db, [draft(old, "scheduled", Status.PENDING)], old)
    finally:
        await db.dispose()
    process = await asyncio.create_subprocess_exec(
        *_python_tidings("retention"),
        env=_env(f"sqlite:///{path}"),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await process.communicate()
    assert process.returncode == 0, output.decode()
    assert "notifications deleted: 5" in output.decode()
    assert "idempotency keys pruned: 6" in output.decode()
    db = connect(f"sqlite:///{path}")
    try:
        assert await count(db, notification) == 1
    finally:
        await db.dispose()
