"""Topics, who follows what: a topic exists while someone follows it."""

from __future__ import annotations

from collections.abc import Sequence

from tidings.clock import utcnow
from tidings.store import topics
from tidings.store.engine import Database
from tidings.store.topics import topics_of, unsubscribe

__all__ = ["subscribe", "subscribers", "topics_of", "unsubscribe"]


async def subscribe(db: Database, topic: str, user_ids: Sequence[str]) -> tuple[int, int]:
    """Add users to a topic; (how many were added, how many follow it now)."""
    return await topics.subscribe(db, topic, user_ids, utcnow())


async def subscribers(db: Database, topic: str) -> int:
    """How many users follow the topic (0: it does not exist)."""
    return await topics.count(db, topic)
