"""The raw baselines: the same rows inserted, claimed and marked sent with plain SQL through
asyncpg, in the bench process, with no HTTP and no tidings code in the loop."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import asyncpg

from bench.accept import chunks
from bench.workload import (
    DELIVERY_COLUMNS,
    DELIVERY_TYPES,
    NOTIFICATION_COLUMNS,
    NOTIFICATION_TYPES,
    PRIORITY,
    Item,
    rows,
)
from tidings.clock import utcnow


def _insert_one(table: str, columns: Sequence[str]) -> str:
    placeholders = ", ".join(f"${i}" for i in range(1, len(columns) + 1))
    return f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({placeholders})"


def _insert_many(table: str, columns: Sequence[str], types: Sequence[str]) -> str:
    arrays = ", ".join(f"${i}::{kind}[]" for i, kind in enumerate(types, start=1))
    return f"INSERT INTO {table} ({', '.join(columns)}) SELECT * FROM unnest({arrays})"


# The key first, into its own table (as tidings does: keys are unique across the
# notification table's day partitions); a key seen before inserts nothing more.
_IDEMPOTENT = " ON CONFLICT (namespace, idempotency_key) DO NOTHING"
_KEY_COLUMNS = ("namespace", "idempotency_key", "notification_id", "request_hash", "created_at")
_KEY_TYPES = ("text", "text", "uuid", "text", "timestamptz")
INSERT_KEY = _insert_one("idempotency_key", _KEY_COLUMNS) + _IDEMPOTENT
INSERT_KEYS = _insert_many("idempotency_key", _KEY_COLUMNS, _KEY_TYPES) + _IDEMPOTENT
INSERT_NOTIFICATION = _insert_one("notification", NOTIFICATION_COLUMNS)
INSERT_DELIVERY = _insert_one("delivery", DELIVERY_COLUMNS)
INSERT_NOTIFICATIONS = _insert_many("notification", NOTIFICATION_COLUMNS, NOTIFICATION_TYPES)
INSERT_DELIVERIES = _insert_many("delivery", DELIVERY_COLUMNS, DELIVERY_TYPES)


def _key(notification: tuple[Any, ...]) -> tuple[Any, ...]:
    """The key row of a notification row (NOTIFICATION_COLUMNS' order)."""
    by_name = dict(zip(NOTIFICATION_COLUMNS, notification, strict=True))
    by_name["notification_id"] = by_name["id"]
    return tuple(by_name[name] for name in _KEY_COLUMNS)


async def insert_singles(pool: asyncpg.Pool, items: Sequence[Item], concurrency: int) -> float:
    """One transaction per item (notification + delivery) from ``concurrency`` connections."""
    queue = iter(items)

    async def worker() -> None:
        async with pool.acquire() as conn:
            for item in queue:
                notification, delivery = rows(item, utcnow())
                async with conn.transaction():
                    await conn.execute(INSERT_KEY, *_key(notification))
                    await conn.execute(INSERT_NOTIFICATION, *notification)
                    await conn.execute(INSERT_DELIVERY, *delivery)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - started


async def insert_batch(conn: asyncpg.Connection, batch: Sequence[Item]) -> None:
    """One transaction: a multi-row insert of the notifications, then of their deliveries."""
    now = utcnow()
    pairs = [rows(item, now) for item in batch]
    notification_columns = list(zip(*(n for n, _ in pairs), strict=True))
    delivery_columns = list(zip(*(d for _, d in pairs), strict=True))
    key_columns = list(zip(*(_key(n) for n, _ in pairs), strict=True))
    async with conn.transaction():
        await conn.execute(INSERT_KEYS, *key_columns)
        await conn.execute(INSERT_NOTIFICATIONS, *notification_columns)
        await conn.execute(INSERT_DELIVERIES, *delivery_columns)


async def insert_batches(
    pool: asyncpg.Pool, items: Sequence[Item], size: int, concurrency: int
) -> float:
    """Batches of ``size``, one transaction each, from ``concurrency`` connections."""
    queue = chunks(items, size)

    async def worker() -> None:
        async with pool.acquire() as conn:
            for batch in queue:
                await insert_batch(conn, batch)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - started


# The same claim as tidings' (docs/architecture.md, Claims, leases, fences and the reaper): due
# PENDING rows of one priority, oldest first,
# skipping rows another claimer holds, moved to SENDING with a lease and the attempt
# counted, returning what a send needs (the delivery and its notification's type and data).
CLAIM = """
WITH due AS (
    SELECT id FROM delivery
    WHERE status = 'PENDING' AND priority = $1 AND next_attempt_at <= $2
    ORDER BY next_attempt_at
    LIMIT $3
    FOR UPDATE SKIP LOCKED
)
UPDATE delivery
SET status = 'SENDING', attempts = delivery.attempts + 1, lease_until = $4, updated_at = $2
FROM due, notification
WHERE delivery.id = due.id AND notification.id = delivery.notification_id
RETURNING delivery.id, delivery.notification_id, delivery.channel, delivery.address,
    delivery.priority, delivery.category, delivery.attempts, delivery.created_at,
    notification.type, notification.data, notification.locale, notification.user_id
"""

MARK_SENT = """
UPDATE delivery
SET status = 'SENT', provider = 'noop', sent_at = $2, lease_until = NULL, updated_at = $2
WHERE id = ANY($1::uuid[]) AND status = 'SENDING'
"""


async def claim_and_send(
    pool: asyncpg.Pool, batch: int, claimers: int, lease: float = 60.0
) -> float:
    """Claim ``batch`` due rows at a time from ``claimers`` loops and mark each batch SENT,
    until none is left; seconds taken."""

    async def claimer() -> None:
        async with pool.acquire() as conn:
            while True:
                now = utcnow()
                claimed = await conn.fetch(
                    CLAIM, PRIORITY, now, batch, now + timedelta(seconds=lease)
                )
                if not claimed:
                    return
                await conn.execute(MARK_SENT, [row["id"] for row in claimed], utcnow())

    started = time.perf_counter()
    await asyncio.gather(*(claimer() for _ in range(claimers)))
    return time.perf_counter() - started
