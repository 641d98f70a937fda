"""Readiness: the database answers, its schema is at the latest migration, and it takes a
write (a probe shared by concurrent checks)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import sqlalchemy as sa

from tidings.singleflight import SingleFlight
from tidings.store.db_errors import unavailable
from tidings.store.engine import Database
from tidings.store.migrate import current_revision, head_revision
from tidings.store.write_probe import probe_write

__all__ = ["PROBE_SECONDS", "Schema", "Unreachable", "WriteProbe", "schema", "unavailable"]

log = logging.getLogger(__name__)

# How long a write probe's verdict stands (a committed write costs a log flush).
PROBE_SECONDS = 1.5


class Unreachable(Exception):
    """The database did not answer; the message names the error's type only."""


@dataclass(frozen=True)
class Schema:
    current: str | None  # the database's revision
    head: str | None  # the latest migration's


async def schema(db: Database) -> Schema:
    """The schema's revision, and the latest; ``Unreachable`` when the database does not
    answer."""
    try:
        async with db.engine.connect() as conn:
            await conn.execute(sa.text("SELECT 1"))
        current = await current_revision(db)
    except (OSError, sa.exc.SQLAlchemyError) as error:
        raise Unreachable(type(error).__name__) from error
    return Schema(current, head_revision())


class WriteProbe:
    """The last write probe's verdict, for ``PROBE_SECONDS``: a load balancer probing every
    process often costs one committed write per process per interval, and concurrent
    probes share the one in flight."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._at = -PROBE_SECONDS
        self._refused: str | None = None
        self._probe = SingleFlight(self._run)

    async def refused(self) -> str | None:
        """Why the database refuses writes, or None when a write commits."""
        if time.monotonic() - self._at >= PROBE_SECONDS:
            await self._probe()
        return self._refused

    async def _run(self) -> None:
        try:
            await probe_write(self.db)
        except Exception as error:
            # The driver's own error names the cause (asyncpg's ReadOnlySQLTransactionError,
            # DiskFullError); its text goes to the log only, /readyz being public.
            cause = getattr(error, "orig", None) or error
            log.warning("readiness: a write to the database failed: %s", cause)
            self._refused = f"the database refuses writes ({type(cause).__name__})"
        else:
            self._refused = None
        self._at = time.monotonic()
