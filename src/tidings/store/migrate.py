"""Alembic migrations, run programmatically on tidings' own async engine."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util import CommandError

from tidings.clock import utcnow
from tidings.store.engine import Database
from tidings.store.partitions import ensure_partitions

_SCRIPTS = Path(__file__).parent / "migrations"


def alembic_config(
    connection: sa.Connection | None = None,
    *,
    partitions_ahead: int = 7,
    day_partitions: bool = True,
) -> Config:
    config = Config()
    config.set_main_option("script_location", str(_SCRIPTS))
    config.attributes["connection"] = connection
    # Read by migration 0026, which puts a PostgreSQL database on day partitions.
    config.attributes["partitions_ahead"] = partitions_ahead
    config.attributes["day_partitions"] = day_partitions
    return config


def head_revision() -> str | None:
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


async def upgrade(
    db: Database,
    revision: str = "head",
    partitions_ahead: int = 7,
    *,
    day_partitions: bool = True,
) -> None:
    """Bring the database schema up to ``revision`` (the latest by default), then make the
    day partitions of today and ``partitions_ahead`` days after it (only on a database on
    day partitions: a no-op on plain tables). On PostgreSQL, migration 0026 puts a new or
    small database on day partitions; ``day_partitions=False`` keeps it on plain tables
    (what tests and benchmarks of that layout, and of the conversion, start from)."""

    def _run(connection: sa.Connection) -> None:
        config = alembic_config(
            connection, partitions_ahead=partitions_ahead, day_partitions=day_partitions
        )
        command.upgrade(config, revision)

    async with db.engine.begin() as conn:
        await conn.run_sync(_run)
    await ensure_partitions(db, utcnow().date(), partitions_ahead)


@contextlib.contextmanager
def _quiet_alembic() -> Iterator[None]:
    """Reading the revision logs two INFO lines ("Context impl ...") each time; /readyz
    reads it on every probe, so they would fill the log. Upgrades still log their steps."""
    logger = logging.getLogger("alembic.runtime.migration")
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(level)


async def current_revision(db: Database) -> str | None:
    def _read(connection: sa.Connection) -> str | None:
        with _quiet_alembic():
            return MigrationContext.configure(connection).get_current_revision()

    async with db.engine.connect() as conn:
        return await conn.run_sync(_read)


async def is_current(db: Database) -> bool:
    return await current_revision(db) == head_revision()


async def pending_upgrade(db: Database) -> str | None:
    """Why a process that does not migrate must not start on ``db``, in one line naming
    `tidings migrate`; None when the schema is at the latest migration, or past it (a later
    tidings migrated it: a process of this one may still be running in a rolling upgrade)."""
    current, head = await current_revision(db), head_revision()
    if current == head:
        return None
    if current is None:
        return "the database is not migrated: run `tidings migrate` first"
    try:
        ScriptDirectory.from_config(alembic_config()).get_revision(current)
    except CommandError:
        return None  # a revision this tidings does not know: newer than its migrations
    return f"the database schema is at revision {current}, not {head}: run `tidings migrate`"
