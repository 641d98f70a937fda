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

from tidings.store.engine import Database

_SCRIPTS = Path(__file__).parent / "migrations"


def alembic_config(connection: sa.Connection | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(_SCRIPTS))
    config.attributes["connection"] = connection
    return config


def head_revision() -> str | None:
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


async def upgrade(db: Database, revision: str = "head") -> None:
    """Bring the database schema up to ``revision`` (the latest by default)."""

    def _run(connection: sa.Connection) -> None:
        command.upgrade(alembic_config(connection), revision)

    async with db.engine.begin() as conn:
        await conn.run_sync(_run)


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
