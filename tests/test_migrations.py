"""The schema Alembic builds is the schema the models declare, on both databases."""

from __future__ import annotations

import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from tidings.store.engine import Database
from tidings.store.migrate import current_revision, head_revision, is_current
from tidings.store.schema import metadata


async def test_migrated_schema_equals_models(db: Database) -> None:
    def diff(connection: sa.Connection) -> list[object]:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        return list(compare_metadata(context, metadata))

    async with db.engine.connect() as conn:
        differences = await conn.run_sync(diff)
    assert differences == []


async def test_database_is_at_head(db: Database) -> None:
    assert await current_revision(db) == head_revision()
    assert await is_current(db)
