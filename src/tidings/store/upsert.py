"""Insert-or-update, the same on SQLite and PostgreSQL (both speak ON CONFLICT)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from tidings.store.engine import Database


def insert(db: Database, table: sa.Table) -> Any:
    """The dialect's INSERT, which has ``on_conflict_do_*``."""
    return db.dialect.insert(table)


async def upsert(db: Database, table: sa.Table, keys: Sequence[str], row: dict[str, Any]) -> None:
    """Insert ``row``, or update every column it names but the keys and ``created_at``."""
    statement = insert(db, table).values(row)
    kept = (*keys, "created_at")
    updates = {name: statement.excluded[name] for name in row if name not in kept}
    statement = statement.on_conflict_do_update(index_elements=list(keys), set_=updates)
    async with db.engine.begin() as conn:
        await conn.execute(statement)
