"""The scratch database: create, migrate, reset between runs, count, drop."""

from __future__ import annotations

from typing import Any

import asyncpg

from bench.config import BenchConfig
from bench.workload import TEMPLATE, TYPE_BODY, TYPE_NAME
from tidings.clock import utcnow
from tidings.store.engine import Database, connect
from tidings.store.migrate import upgrade
from tidings.store.templates import add_version
from tidings.store.types import NotificationType, put_type


async def _admin(config: BenchConfig, *statements: str) -> None:
    conn = await asyncpg.connect(config.admin_url)
    try:
        for statement in statements:
            await conn.execute(statement)
    finally:
        await conn.close()


async def register_type(
    db: Database, name: str, body: dict[str, Any], template: dict[str, Any]
) -> None:
    """Register a type (``body``: category, priority, channels) with ``template`` as its
    English words on every channel."""
    now = utcnow()
    kind = NotificationType(
        name=name,
        category=body["category"],
        priority=body["priority"],
        channels=body["channels"],
        ttl_seconds=None,
        retry=None,
        required_channels=None,
        default_locale=None,
        collapse_key=None,
        created_at=now,
        updated_at=now,
    )
    await put_type(db, kind)
    for channel in body["channels"]:
        await add_version(db, name, channel, "en", template, now)


async def create(config: BenchConfig) -> None:
    """A fresh database (a leftover from an interrupted run is dropped), migrated, with the
    notification type every measurement sends registered. On plain tables, not the day
    partitions a new database gets: the raw baselines (statements on the tables, pgbench's
    random ids) are written for them; ``bench.partitions`` compares the layouts."""
    name = config.database
    await _admin(config, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)", f"CREATE DATABASE {name}")
    db = connect(config.database_url)
    try:
        await upgrade(db, day_partitions=False)
        await register_type(db, TYPE_NAME, TYPE_BODY, TEMPLATE)
    finally:
        await db.dispose()


async def drop(config: BenchConfig) -> None:
    await _admin(config, f"DROP DATABASE IF EXISTS {config.database} WITH (FORCE)")


async def reset(pool: asyncpg.Pool) -> None:
    """Empty the tables a measurement writes, so every run starts equal."""
    async with pool.acquire() as conn:
        await conn.execute("TRUNCATE delivery_event, delivery, notification, idempotency_key")
        await conn.execute("CHECKPOINT")


async def settle(pool: asyncpg.Pool) -> None:
    """After pre-inserting rows: fresh planner statistics and no dirty pages to write."""
    async with pool.acquire() as conn:
        await conn.execute("ANALYZE notification, delivery")
        await conn.execute("CHECKPOINT")


async def status_counts(pool: asyncpg.Pool) -> tuple[int, dict[str, int]]:
    """The number of notifications, and of deliveries by status."""
    async with pool.acquire() as conn:
        notifications = await conn.fetchval("SELECT count(*) FROM notification")
        rows = await conn.fetch("SELECT status, count(*) AS n FROM delivery GROUP BY status")
    return notifications, {row["status"]: row["n"] for row in rows}


async def expect(pool: asyncpg.Pool, what: str, notifications: int, status: str) -> None:
    """Fail loudly unless exactly ``notifications`` rows, each with one delivery in ``status``."""
    found, statuses = await status_counts(pool)
    if found != notifications or statuses != {status: notifications}:
        raise RuntimeError(
            f"{what}: expected {notifications} notifications with one {status} delivery each, "
            f"found {found} notifications and deliveries {statuses}"
        )


async def facts(pool: asyncpg.Pool) -> dict[str, str]:
    """The server's version and the settings that decide commit cost."""
    names = ["server_version", "synchronous_commit", "fsync", "shared_buffers", "max_connections"]
    async with pool.acquire() as conn:
        rows = await conn.fetch(
            "SELECT name, current_setting(name) AS value FROM unnest($1::text[]) AS name", names
        )
    return {row["name"]: row["value"] for row in rows}
