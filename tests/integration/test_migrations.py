"""The schema Alembic builds is the schema the models declare, on both databases."""

from __future__ import annotations

import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from tidings.store.engine import Database
from tidings.store.migrate import current_revision, head_revision, is_current
from tidings.store.partitions import is_partition_name
from tidings.store.schema import metadata


def _not_a_partition(name: str | None, kind: str, _parent: object) -> bool:
    return kind != "table" or name is None or not is_partition_name(name)


async def test_migrated_schema_equals_models(db: Database) -> None:
    def diff(connection: sa.Connection) -> list[object]:
        # Day partitions (PostgreSQL) are made by code, not declared by the models.
        opts = {"compare_type": True, "include_name": _not_a_partition}
        context = MigrationContext.configure(connection, opts=opts)
        return list(compare_metadata(context, metadata))

    async with db.engine.connect() as conn:
        differences = await conn.run_sync(diff)
    assert differences == []


async def test_database_is_at_head(db: Database) -> None:
    assert await current_revision(db) == head_revision()
    assert await is_current(db)
