"""Frequency caps' counters: sends per user, category and local day."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import date

import sqlalchemy as sa

from tidings.store.engine import Database
from tidings.store.schema import frequency_count
from tidings.store.upsert import insert

# (user id, category, the user's local day, the cap)
Send = tuple[str, str, date, int]


async def count_sends(db: Database, sends: Sequence[Send]) -> list[bool]:
    """Count each send against its cap, in order, in one transaction; False for a send over
    its cap (not counted). The increment is one atomic upsert, so dispatchers racing for a
    user's last slot of the day cannot both win it."""
    allowed: list[bool] = []
    async with db.engine.begin() as conn:
        for user_id, category, day, cap in sends:
            if cap <= 0:
                allowed.append(False)
                continue
            first = insert(db, frequency_count).values(
                user_id=user_id, category=category, day=day, sent=1
            )
            increment = first.on_conflict_do_update(
                index_elements=["user_id", "category", "day"],
                set_={"sent": frequency_count.c.sent + 1},
                where=frequency_count.c.sent < cap,
            )
            counted = await conn.execute(increment.returning(frequency_count.c.sent))
            allowed.append(counted.first() is not None)
    return allowed


# (user id, category, local day)
Day = tuple[str, str, date]
# Keys per query: three parameters each, under SQLite's 32,766.
_READ_CHUNK = 5_000


async def sent_counts(db: Database, keys: Collection[Day]) -> dict[Day, int]:
    """What each (user, category, day) has used of its allowance (absent: nothing)."""
    wanted = list(keys)
    found: dict[Day, int] = {}
    async with db.engine.connect() as conn:
        for start in range(0, len(wanted), _READ_CHUNK):
            chunk = wanted[start : start + _READ_CHUNK]
            query = sa.select(
                frequency_count.c.user_id,
                frequency_count.c.category,
                frequency_count.c.day,
                frequency_count.c.sent,
            ).where(
                sa.tuple_(
                    frequency_count.c.user_id, frequency_count.c.category, frequency_count.c.day
                ).in_(chunk)
            )
            for row in await conn.execute(query):
                found[(row.user_id, row.category, row.day)] = row.sent
    return found
