"""Waking dispatcher lanes the moment urgent work is committed, instead of at the next poll.

In one process an asyncio event per priority does it (``Wakeup``). Across processes on
PostgreSQL the intake's transaction runs ``notify_postgres`` (``pg_notify``, delivered at
commit) and each dispatcher LISTENs (``listen_postgres``). Both ends live here, so the
channel name and the payload are defined once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import asyncpg

from tidings.priorities import Priority
from tidings.store.engine import Database

log = logging.getLogger(__name__)

WAKEUP_CHANNEL = "tidings_wakeup"


class Wakeup:
    def __init__(self) -> None:
        self._events = {priority: asyncio.Event() for priority in Priority}

    def notify(self, priority: Priority) -> None:
        self._events[priority].set()

    async def wait(self, priority: Priority, within: float) -> bool:
        """Wait until ``priority`` is notified or ``within`` seconds pass; True if notified."""
        event = self._events[priority]
        try:
            async with asyncio.timeout(within):
                await event.wait()
        except TimeoutError:
            return False
        finally:
            event.clear()
        return True


async def notify_postgres(conn: Any, priority: Priority) -> None:
    """Wake ``priority``'s lanes in every process that LISTENs, when ``conn``'s transaction
    commits (``conn``: an asyncpg connection inside that transaction)."""
    await conn.execute("SELECT pg_notify($1, $2)", WAKEUP_CHANNEL, priority.value)


async def listen_postgres(db: Database, wakeup: Wakeup, stop: asyncio.Event) -> None:
    """Relay NOTIFYs from other processes to ``wakeup`` until ``stop``; reconnects on errors."""
    dsn = db.url.set(drivername="postgresql").render_as_string(hide_password=False)

    def on_notify(_conn: Any, _pid: int, _channel: str, payload: str) -> None:
        with contextlib.suppress(ValueError):
            wakeup.notify(Priority(payload))

    while not stop.is_set():
        try:
            conn = await asyncpg.connect(dsn)
        except (OSError, asyncpg.PostgresError) as error:
            log.warning("LISTEN connection failed (%s); polling until it is back", error)
            await _sleep_unless(stop, 1.0)
            continue
        try:
            await conn.add_listener(WAKEUP_CHANNEL, on_notify)
            # A notification sent while we were disconnected is lost: wake everyone once.
            for priority in Priority:
                wakeup.notify(priority)
            while not stop.is_set() and not conn.is_closed():
                await _sleep_unless(stop, 1.0)
        finally:
            await conn.close()


async def _sleep_unless(stop: asyncio.Event, seconds: float) -> None:
    """Sleep ``seconds``, or less if ``stop`` is set meanwhile."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await stop.wait()
