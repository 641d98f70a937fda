"""Waiting for the database at start-up: a process started beside PostgreSQL (docker compose,
a Kubernetes pod, a machine booting) often runs before PostgreSQL accepts connections. It
waits with a backoff, one log line per try, instead of exiting for its supervisor to restart.

Only an unreachable database is waited for (refused, timed out, a name not resolving yet,
"the database system is starting up", too many connections); a wrong password or a missing
database fails at once, as waiting cannot mend it. SQLite is a file: nothing to wait for.
Redis and the Kafka broker need no wait here: dispatchers run without Redis (local shares)
until it answers, and relays and workers retry the broker in their loops."""

from __future__ import annotations

import asyncio
import logging
import random

import sqlalchemy as sa

from tidings.store.db_errors import unavailable
from tidings.store.engine import Database

log = logging.getLogger(__name__)

FIRST_DELAY = 0.5
MAX_DELAY = 10.0


def reachable_problem(error: BaseException) -> bool:
    """Whether ``error`` says the database cannot be reached (yet), not that it refused us."""
    return isinstance(error, OSError) or unavailable(error)


def where(db: Database) -> str:
    url = db.url
    return f"{url.host or 'localhost'}:{url.port or 5432}"


async def wait_for_database(db: Database, max_delay: float = MAX_DELAY) -> int:
    """Return once ``SELECT 1`` succeeds on PostgreSQL (at once on SQLite); retry an
    unreachable database with a doubling, jittered delay up to ``max_delay``. Returns how
    many tries failed."""
    if not db.dialect.server:
        return 0
    delay = FIRST_DELAY
    failed = 0
    while True:
        try:
            async with db.engine.connect() as conn:
                await conn.execute(sa.text("SELECT 1"))
        except Exception as error:
            if not reachable_problem(error):
                raise
            failed += 1
            wait = min(max_delay, delay) * random.uniform(0.8, 1.2)
            log.warning(
                "database not reachable at %s (%s), retrying in %.1fs",
                where(db),
                type(error).__name__,
                wait,
            )
            await asyncio.sleep(wait)
            delay *= 2
            continue
        if failed:
            log.info("database reachable at %s after %d failed tries", where(db), failed)
        return failed
