"""Wake-ups of the inbox's live streams (docs/inbox.md, Live updates): a user's feed changed
(a message stored, one marked), so their open streams read it again.

Across processes through PostgreSQL: the store's writes run ``pg_notify('tidings_inbox',
user id)`` in their own transaction (delivered at commit), and each API process LISTENs
on one connection of its own while it holds a stream. Within a process (SQLite, or a
``tidings serve`` that stores and streams), ``wake`` after the commit. A wake-up only says
"look again": each stream reads what is new itself, and also looks at every heartbeat, so a
wake-up lost (a LISTEN connection that dropped) delays an update by a heartbeat at most.

Per stream one ``asyncio.Event``: wake-ups coalesce, so a stream's memory does not grow
however many come while it writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import asyncpg
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.store.engine import Database

log = logging.getLogger(__name__)

CHANNEL = "tidings_inbox"


async def notify_in(db: Database, conn: AsyncConnection, user_ids: set[str]) -> None:
    """Wake the streams of ``user_ids`` in every process when ``conn``'s transaction
    commits (PostgreSQL; elsewhere ``InboxWakeup.wake`` does it in the process)."""
    if not db.dialect.notifies:
        return
    for user in sorted(user_ids):
        await conn.execute(sa.select(sa.func.pg_notify(CHANNEL, user)))


class StreamsFull(Exception):
    """A user's or the process's cap on open streams is reached."""

    def __init__(self, what: str, cap: int) -> None:
        super().__init__(f"{what} already hold {cap} open streams")
        self.what = what
        self.cap = cap


class InboxWakeup:
    def __init__(self, db: Database, per_user: int, per_process: int) -> None:
        self.db = db
        self.per_user = per_user
        self.per_process = per_process
        self._streams: dict[str, set[asyncio.Event]] = {}
        self._open = 0
        self._listener: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()

    @property
    def open_streams(self) -> int:
        return self._open

    def subscribe(self, user_id: str) -> asyncio.Event:
        """A new stream's wake-up; ``StreamsFull`` over a cap."""
        mine = self._streams.get(user_id, set())
        if len(mine) >= self.per_user:
            raise StreamsFull("this user's streams", self.per_user)
        if self._open >= self.per_process:
            raise StreamsFull("this process's streams", self.per_process)
        event = asyncio.Event()
        self._streams.setdefault(user_id, set()).add(event)
        self._open += 1
        self._listen()
        return event

    def unsubscribe(self, user_id: str, event: asyncio.Event) -> None:
        mine = self._streams.get(user_id)
        if mine is None or event not in mine:
            return
        mine.discard(event)
        self._open -= 1
        if not mine:
            del self._streams[user_id]

    def wake(self, user_id: str) -> None:
        for event in self._streams.get(user_id, ()):
            event.set()

    def _wake_all(self) -> None:
        for events in self._streams.values():
            for event in events:
                event.set()

    def _listen(self) -> None:
        if self.db.dialect.notifies and (self._listener is None or self._listener.done()):
            self._stop.clear()
            self._listener = asyncio.create_task(self._listen_postgres())

    async def _listen_postgres(self) -> None:
        """LISTEN while this process holds a stream; reconnects on errors."""
        dsn = self.db.url.set(drivername="postgresql").render_as_string(hide_password=False)

        def on_notify(_conn: Any, _pid: int, _channel: str, payload: str) -> None:
            self.wake(payload)

        while not self._stop.is_set() and self._open:
            try:
                conn = await asyncpg.connect(dsn)
            except (OSError, asyncpg.PostgresError) as error:
                log.warning("inbox LISTEN failed (%s); streams look at each heartbeat", error)
                await _sleep_unless(self._stop, 1.0)
                continue
            try:
                await conn.add_listener(CHANNEL, on_notify)
                self._wake_all()  # what was sent while no connection listened
                while not self._stop.is_set() and not conn.is_closed() and self._open:
                    await _sleep_unless(self._stop, 1.0)
            finally:
                with contextlib.suppress(Exception):
                    await conn.close()

    async def close(self) -> None:
        self._stop.set()
        if self._listener is not None:
            with contextlib.suppress(Exception):
                await self._listener


async def _sleep_unless(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await stop.wait()
