"""Topics: who follows what (``topic_subscription``), and every statement on them."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

import sqlalchemy as sa

from tidings.store.engine import Database
from tidings.store.schema import topic_subscription
from tidings.store.upsert import insert

# Rows per INSERT: the API's most per call, at three parameters a row under SQLite's 32,766
# and asyncpg's 32,767 (so a call is one statement).
CHUNK = 10_000


async def subscribe(
    db: Database, topic: str, user_ids: Iterable[str], now: datetime
) -> tuple[int, int]:
    """Add ``user_ids`` to ``topic`` in one transaction; existing subscribers are left as
    they are. Returns (how many were added, how many the topic has now)."""
    ids = list(dict.fromkeys(user_ids))  # a duplicate counts once
    added = 0
    async with db.engine.begin() as conn:
        for start in range(0, len(ids), CHUNK):
            rows = [
                {"topic": topic, "user_id": user_id, "created_at": now}
                for user_id in ids[start : start + CHUNK]
            ]
            statement = insert(db, topic_subscription).values(rows).on_conflict_do_nothing()
            added += (await conn.execute(statement)).rowcount
        total = (await conn.execute(_count(topic))).scalar_one()
    return added, total


async def count(db: Database, topic: str) -> int:
    """How many users follow ``topic`` (0 for a topic nobody follows)."""
    async with db.engine.connect() as conn:
        return (await conn.execute(_count(topic))).scalar_one()


async def unsubscribe(db: Database, topic: str, user_id: str) -> bool:
    """Remove one subscription; False when there was none."""
    statement = sa.delete(topic_subscription).where(
        topic_subscription.c.topic == topic, topic_subscription.c.user_id == user_id
    )
    async with db.engine.begin() as conn:
        return (await conn.execute(statement)).rowcount > 0


async def topics_of(db: Database, user_id: str) -> list[str]:
    """The topics ``user_id`` follows, sorted by code point (the same on both databases,
    whatever PostgreSQL's collation)."""
    query = sa.select(topic_subscription.c.topic).where(topic_subscription.c.user_id == user_id)
    async with db.engine.connect() as conn:
        return sorted(await conn.scalars(query))


def _count(topic: str) -> sa.Select[int]:
    return (
        sa.select(sa.func.count())
        .select_from(topic_subscription)
        .where(topic_subscription.c.topic == topic)
    )
