"""Connecting to the database: URL normalisation and per-dialect connection set-up."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from tidings.store.db_errors import connection_lost

_ASYNC_DRIVERS = {"sqlite": "sqlite+aiosqlite", "postgresql": "postgresql+asyncpg"}


def async_url(url: str) -> sa.URL:
    """``sqlite:///x.db`` or ``postgresql://...`` with the asyncio driver tidings uses."""
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    if backend not in _ASYNC_DRIVERS:
        raise ValueError(f"unsupported database {backend!r}: use sqlite:/// or postgresql://")
    return parsed.set(drivername=_ASYNC_DRIVERS[backend])


@dataclass(frozen=True)
class Database:
    """The engine and what the SQL layer needs to know about its dialect."""

    engine: AsyncEngine

    @property
    def is_postgres(self) -> bool:
        return self.engine.dialect.name == "postgresql"

    @property
    def url(self) -> sa.URL:
        return self.engine.url

    async def dispose(self) -> None:
        await self.engine.dispose()

    @contextlib.asynccontextmanager
    async def asyncpg(self) -> AsyncIterator[Any]:
        """The pooled asyncpg connection itself, for the hot paths (claims, outcomes, intake)
        whose per-row cost in SQLAlchemy's parameter handling would dominate."""
        if not self.is_postgres:
            raise RuntimeError("asyncpg connections exist on PostgreSQL only")
        async with self.engine.connect() as conn:
            raw = await conn.get_raw_connection()
            try:
                yield raw.driver_connection
            except BaseException as error:
                # SQLAlchemy sees no error raised by the driver connection itself: a dead
                # one would go back to the pool and fail every request that draws it.
                if connection_lost(error):
                    await conn.invalidate()
                raise


def connect(url: str, pool_size: int = 10) -> Database:
    """Engines hide statement parameters in errors: addresses and message data must never
    reach a log through an exception's text."""
    target = async_url(url)
    if target.get_backend_name() == "sqlite":
        return Database(_sqlite_engine(target))
    # No pre-ping (three round trips per checkout with asyncpg): a connection broken by a
    # database restart fails one request (503, safe to retry) and is replaced.
    engine = create_async_engine(
        target, pool_size=pool_size, max_overflow=pool_size, hide_parameters=True
    )
    return Database(engine)


def _sqlite_engine(url: sa.URL) -> AsyncEngine:
    # One connection: every transaction takes SQLite's write lock at BEGIN (below), so a
    # second connection could only wait for it, in SQLite's busy handler, which sleeps up to
    # 100 ms between tries (an OTP's claim stuck behind a marketing batch's commit). Waiting
    # for the pool's one connection is an asyncio queue instead: first come, handed over at
    # once. Other processes on the same file still meet the busy timeout.
    engine = create_async_engine(
        url,
        connect_args={"timeout": 30},
        hide_parameters=True,
        pool_size=1,
        max_overflow=0,
        pool_timeout=30,
    )

    @sa.event.listens_for(engine.sync_engine, "do_connect")
    def _before_connect(*_args: Any) -> None:
        _create_private(url)

    @sa.event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy's "begin" hook issue BEGIN itself (see below).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        # FULL: a commit is on disk before the API answers 202.
        cursor.execute("PRAGMA synchronous=FULL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.close()

    @sa.event.listens_for(engine.sync_engine, "begin")
    def _on_begin(conn: sa.Connection) -> None:
        # Take the write lock at BEGIN: a deferred transaction that reads and then writes
        # fails at once with SQLITE_BUSY instead of waiting for the other writer.
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


def _create_private(url: sa.URL) -> None:
    """Create the database file 0600 before SQLite does (it would make it 0644 under the
    usual umask): it holds addresses and endpoint secrets. SQLite gives the ``-wal`` and
    ``-shm`` files it makes later the main file's permissions. An existing file is left as
    its owner set it."""
    path = url.database
    if not path or path == ":memory:" or path.startswith("file:"):
        return
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except (FileExistsError, FileNotFoundError):
        pass  # there already, or no such directory (SQLite says so when it opens it)
