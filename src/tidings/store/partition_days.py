"""Day partitions by name: which days a dispatcher claims from, and which day's partition
holds a delivery (docs/architecture.md, Retention and partitions).

A statement on a partitioned parent whose key is no plan-time constant locks every
partition and all their indexes (PostgreSQL 15 locks before it prunes): hundreds of
relation locks per claim, and the lock manager, not the rows, then limits dispatch. So on
day partitions the hot statements name one day's tables (``delivery_pYYYYMMDD``), and each
process keeps, per database, whether it is partitioned and the days that may hold due
deliveries (``DayTables``): refreshed every minute and after the partition maintenance.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
import weakref
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any

import asyncpg.exceptions
from sqlalchemy.ext.asyncio import AsyncEngine

from tidings.store.engine import Database
from tidings.store.partitions import attached, is_partitioned, live_days, partition_name

REFRESH_SECONDS = 60.0
# Deliveries made before their ids were made in their notification's millisecond
# (ids.delivery_ids) may sit a midnight away from their id's day: their ids were made
# microseconds before their notification's. An id this close to a midnight is looked up
# on the parent, bounded to three days (partitions.notification_days), as it was before.
EDGE_MS = 10_000
_DAY_MS = 86_400_000
_EPOCH = date(1970, 1, 1)
_LAST_DAY = (date.max - _EPOCH).days


def delivery_day(delivery_id: uuid.UUID) -> date | None:
    """The day whose partition holds the delivery ``delivery_id``; None when it may be
    another (an id near a midnight, or no UUID v7 of a day a date can hold)."""
    day, into = divmod(delivery_id.int >> 80, _DAY_MS)
    if into < EDGE_MS or into >= _DAY_MS - EDGE_MS or day > _LAST_DAY:
        return None
    return _EPOCH + timedelta(days=day)


@dataclass
class DayTables:
    """One process's view of a database's layout and of the days to claim from."""

    # On day partitions alone: each day's tables are named (not a partition of another
    # making, such as one for every id, which the parents reach).
    partitioned: bool = False
    # The days to claim from: at the refresh, today's, tomorrow's and those holding a
    # delivery in progress; since then, today's and tomorrow's made (claim_days).
    days: frozenset[date] = frozenset()
    refreshed: float | None = None  # time.monotonic() of the last refresh
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def stale(self) -> bool:
        return self.refreshed is None or time.monotonic() - self.refreshed > REFRESH_SECONDS

    async def refresh(self, db: Database, today: date) -> None:
        """Whether ``db`` is on day partitions alone, and which days may hold due
        deliveries."""
        self.partitioned, self.days = False, frozenset()
        if await is_partitioned(db):
            async with db.asyncpg() as conn:
                if await _by_day_alone(conn):
                    self.days = frozenset(await _claimable(conn, today))
                    self.partitioned = True
        self.refreshed = time.monotonic()

    async def claim_days(self, conn: Any, today: date) -> list[date]:
        """The days to claim from, oldest first: the refresh's, today's and tomorrow's. Each
        of these two the refresh did not see is looked for at every claim (one catalog
        probe), so a day made since, by any process, is claimed from at once; with
        ``partitions_ahead`` at least 1 both exist a day ahead. ``conn``: asyncpg."""
        for day in (today, today + timedelta(days=1)):
            if day not in self.days and await conn.fetchval(
                "SELECT to_regclass($1)", partition_name("delivery", day)
            ):
                self.days |= {day}
        return sorted(self.days)

    def gone(self, day: date) -> None:
        """``day``'s partition was not there (dropped since the refresh)."""
        self.days -= {day}


# Partitions of the claim's two tables that are not one day's: rows in one would never be
# claimed by day, so such a database keeps the statements on the parents.
_OTHER_PARTITIONS = """
SELECT EXISTS (
    SELECT 1 FROM pg_inherits i
    JOIN pg_class parent ON parent.oid = i.inhparent
    JOIN pg_class child ON child.oid = i.inhrelid
    WHERE parent.relname IN ('delivery', 'notification') AND pg_table_is_visible(parent.oid)
        AND child.relname !~ ('^' || parent.relname || '_p[0-9]{8}$')
)
"""


async def _by_day_alone(conn: Any) -> bool:
    return not await conn.fetchval(_OTHER_PARTITIONS)


async def _claimable(conn: Any, today: date) -> set[date]:
    """Today's and tomorrow's days, and every other holding a delivery in progress (a
    retry, a scheduled send, a lease): none other can hold a due delivery, but through a
    dead-letter replay (then claimed after the next refresh, within the minute), or a
    process whose clock runs over a day ahead (likewise)."""
    for _ in range(2):
        with contextlib.suppress(asyncpg.exceptions.UndefinedTableError):
            return await _claimable_now(conn, today)  # else a day was dropped meanwhile
    return await _claimable_now(conn, today)


async def _claimable_now(conn: Any, today: date) -> set[date]:
    days = (await attached(conn))["delivery"]
    near = days & {today, today + timedelta(days=1)}
    return near | await live_days(conn, days - near)


_TABLES: weakref.WeakKeyDictionary[AsyncEngine, DayTables] = weakref.WeakKeyDictionary()


def _tables(db: Database) -> DayTables:
    found = _TABLES.get(db.engine)
    if found is None:
        found = _TABLES[db.engine] = DayTables()
    return found


async def day_tables(db: Database, today: date) -> DayTables:
    """This process's ``DayTables`` of ``db``, refreshed when over a minute old. Never
    partitioned on SQLite."""
    tables = _tables(db)
    if db.dialect.partitions and tables.stale():
        async with tables.lock:
            if tables.stale():
                await tables.refresh(db, today)
    return tables


async def refresh(db: Database, today: date) -> None:
    """Refresh at once (the partition maintenance made or dropped days)."""
    tables = _tables(db)
    if db.dialect.partitions:
        async with tables.lock:
            await tables.refresh(db, today)
