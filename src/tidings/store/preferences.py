"""Preferences' SQL: one row per (user, category, channel) that the user set."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from tidings.store.dialects import Variants
from tidings.store.engine import Database
from tidings.store.schema import preference
from tidings.store.upsert import upsert

# (category, channel) -> enabled, as stored for one user; what is absent takes the default.
UserPreferences = Mapping[tuple[str, str], bool]


async def replace(
    db: Database, user_id: str, categories: Mapping[str, Mapping[str, bool]], now: datetime
) -> None:
    """The user's preferences become exactly ``categories`` (the rest back to defaults)."""
    rows = [
        {
            "user_id": user_id,
            "category": category,
            "channel": channel,
            "enabled": enabled,
            "updated_at": now,
        }
        for category, channels in categories.items()
        for channel, enabled in channels.items()
    ]
    async with db.engine.begin() as conn:
        await conn.execute(sa.delete(preference).where(preference.c.user_id == user_id))
        if rows:
            await conn.execute(sa.insert(preference), rows)


async def switch(
    db: Database, user_id: str, category: str, channel: str, enabled: bool, now: datetime
) -> None:
    """Set one (category, channel) preference, leaving the others as they are."""
    row = {
        "user_id": user_id,
        "category": category,
        "channel": channel,
        "enabled": enabled,
        "updated_at": now,
    }
    await upsert(db, preference, ["user_id", "category", "channel"], row)


async def of_users(db: Database, user_ids: Collection[str]) -> dict[str, UserPreferences]:
    """Stored preferences of those users that have any (one query)."""
    if not user_ids:
        return {}
    rows = await _of_users.of(db)(db, list(user_ids))
    found: dict[str, dict[tuple[str, str], bool]] = {}
    for row in rows:
        found.setdefault(row["user_id"], {})[(row["category"], row["channel"])] = row["enabled"]
    return dict(found)


# PostgreSQL: one array parameter instead of an IN list rendered per call.
_PG_OF_USERS = """
SELECT user_id, category, channel, enabled FROM preference WHERE user_id = ANY($1::text[])
"""


async def _of_users_postgres(db: Database, user_ids: list[str]) -> Sequence[Mapping[Any, Any]]:
    async with db.asyncpg() as conn:
        rows: Sequence[Mapping[Any, Any]] = await conn.fetch(_PG_OF_USERS, user_ids)
    return rows


async def _of_users_sqlite(db: Database, user_ids: list[str]) -> Sequence[Mapping[Any, Any]]:
    query = sa.select(preference).where(preference.c.user_id.in_(user_ids))
    async with db.engine.connect() as conn:
        return [row._mapping for row in await conn.execute(query)]


_of_users = Variants(postgres=_of_users_postgres, sqlite=_of_users_sqlite)
