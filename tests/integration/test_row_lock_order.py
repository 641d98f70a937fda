"""Statements that lock several delivery rows take them in one order, by id (issue 23: the
Kafka lane's claim of QUEUED rows deadlocked against the reaper, which updated the same rows
in the order it found them). PostgreSQL only: SQLite has one writer at a time.

Each test sets the rows up so that any order but the id's is the opposite one (made in
descending id order, so stored and leased that way), holds the lowest id in a third
transaction, starts the claim (it waits there, holding nothing yet), then the other
statement, and lets the lowest row go: with the rows taken in opposite orders, the two wait
on each other and PostgreSQL kills one (deadlock detected).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any

import pytest

from tests.integration.test_partitions import draft
from tidings.clock import utcnow
from tidings.states import Status
from tidings.store.claims import reap_expired_leases
from tidings.store.engine import Database, connect
from tidings.store.intake import accept
from tidings.store.queue import claim_queued

ROWS = 8
LEASE = timedelta(seconds=60)


@pytest.fixture
async def pg(pg_database_url: str) -> AsyncIterator[Database]:
    db = connect(pg_database_url)
    yield db
    await db.dispose()


async def queued_rows(db: Database, now: datetime, lease: datetime) -> list[uuid.UUID]:
    """``ROWS`` QUEUED deliveries of one campaign, made (and so stored) in descending id
    order, each leased until ``lease`` (the higher the id, the earlier); their ids, ascending."""
    made = [now + timedelta(milliseconds=n) for n in reversed(range(ROWS))]
    drafts = [draft(at, f"row-{n}", Status.PENDING) for n, at in enumerate(made)]
    for item, at in zip(drafts, made, strict=True):
        await accept(db, [item], at)
    ids = [item.deliveries[0].id for item in drafts]
    campaign = uuid.uuid4()
    async with db.asyncpg() as conn:
        await conn.execute(
            """UPDATE delivery SET status = 'QUEUED', campaign_id = $2,
                   lease_until = $3::timestamptz + id_rank * interval '1 millisecond'
               FROM unnest($1::uuid[]) WITH ORDINALITY AS r(id, id_rank)
               WHERE delivery.id = r.id""",
            ids,
            campaign,
            lease,
        )
        stored = await conn.fetch("SELECT id FROM delivery ORDER BY ctid")
    assert [row["id"] for row in stored] == ids  # stored in descending id order
    return sorted(ids)


async def waiting(db: Database) -> int:
    """The backends of this database waiting for a lock."""
    async with db.asyncpg() as conn:
        found: int = await conn.fetchval(
            """SELECT count(*) FROM pg_stat_activity
               WHERE datname = current_database() AND wait_event_type = 'Lock'"""
        )
    return found


async def until(check: Callable[[], Awaitable[bool]], within: float = 10) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.02)


async def race(db: Database, ids: list[uuid.UUID], other: Awaitable[Any]) -> tuple[Any, Any]:
    """The claim of every row's ticket against ``other``, with the lowest row held until
    both have started; their results (an exception raises: a deadlock among them)."""
    now = utcnow()
    async with db.asyncpg() as blocker, blocker.transaction():
        await blocker.execute("SELECT 1 FROM delivery WHERE id = $1 FOR UPDATE", ids[0])
        leases = await blocker.fetch("SELECT id, lease_until FROM delivery ORDER BY id")
        tickets = [(row["id"], row["lease_until"]) for row in leases]
        claim = asyncio.create_task(claim_queued(db, tickets, now, now + LEASE))
        await until(lambda: _waiting_at_least(db, 1))
        second = asyncio.ensure_future(other)
        await until(lambda: _done_or_waiting(db, second))
    return await asyncio.wait_for(asyncio.gather(claim, second), timeout=30)


async def _waiting_at_least(db: Database, count: int) -> bool:
    return await waiting(db) >= count


async def _done_or_waiting(db: Database, task: asyncio.Future[Any]) -> bool:
    return task.done() or await waiting(db) >= 2


async def statuses(db: Database) -> dict[uuid.UUID, str]:
    async with db.asyncpg() as conn:
        rows = await conn.fetch("SELECT id, status FROM delivery")
    return {row["id"]: row["status"] for row in rows}


async def test_the_reaper_and_the_queue_claim_never_deadlock(pg: Database) -> None:
    """The reaper passes by the row the claim waits for and returns the others; the claim
    then takes that one."""
    now = utcnow()
    ids = await queued_rows(pg, now, now - timedelta(seconds=1))
    claimed, reaped = await race(pg, ids, reap_expired_leases(pg, utcnow()))
    assert [c.id for c in claimed] == ids[:1]
    assert reaped == ROWS - 1
    assert await statuses(pg) == {i: "SENDING" if i == ids[0] else "PENDING" for i in ids}
