"""SQLite through aiosqlite: one writer at a time, which takes the database's write lock at
BEGIN; so no row locks, no day partitions, no wake-ups between processes."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.dialects import sqlite
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

if TYPE_CHECKING:
    from tidings.store.dialects.base import Variants

T = TypeVar("T")


@dataclass(frozen=True)
class Sqlite:
    name: str = "sqlite"
    server: bool = False
    partitions: bool = False
    notifies: bool = False

    def make_engine(self, url: sa.URL, pool_size: int) -> AsyncEngine:
        del pool_size  # one connection: see _engine
        return _engine(url)

    def pick(self, variants: Variants[T]) -> T:
        return variants.sqlite

    def insert(self, table: sa.Table) -> Any:
        return sqlite.insert(table)

    def locked(
        self, query: sa.Select[Any], *, skip_locked: bool = False, of: sa.Table | None = None
    ) -> sa.Select[Any]:
        return query  # the transaction holds the database's one write lock since BEGIN

    async def snapshot(self, conn: AsyncConnection) -> AsyncConnection:
        return conn  # one writer at a time: no commit lands between a read's statements

    @contextlib.asynccontextmanager
    async def connection(self, engine: AsyncEngine) -> AsyncIterator[Any]:
        raise RuntimeError("asyncpg connections exist on PostgreSQL only")
        yield  # an async generator, for asynccontextmanager


def _engine(url: sa.URL) -> AsyncEngine:
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
