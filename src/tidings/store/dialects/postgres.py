"""PostgreSQL through asyncpg: concurrent writers, row locks, day partitions, LISTEN/NOTIFY."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects.postgresql.asyncpg import PGDialect_asyncpg
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.sql.compiler import SQLCompiler

from tidings.store.db_errors import connection_lost

if TYPE_CHECKING:
    from tidings.store.dialects.base import Variants

T = TypeVar("T")


@dataclass(frozen=True)
class Postgres:
    name: str = "postgresql"
    server: bool = True
    partitions: bool = True
    notifies: bool = True

    def make_engine(self, url: sa.URL, pool_size: int) -> AsyncEngine:
        # No pre-ping (three round trips per checkout with asyncpg): a connection broken by
        # a database restart fails one request (503, safe to retry) and is replaced.
        return create_async_engine(
            url, pool_size=pool_size, max_overflow=pool_size, hide_parameters=True
        )

    def pick(self, variants: Variants[T]) -> T:
        return variants.postgres

    def insert(self, table: sa.Table) -> Any:
        return postgresql.insert(table)

    def locked(
        self, query: sa.Select[Any], *, skip_locked: bool = False, of: sa.Table | None = None
    ) -> sa.Select[Any]:
        return query.with_for_update(skip_locked=skip_locked, of=of)

    async def snapshot(self, conn: AsyncConnection) -> AsyncConnection:
        return await conn.execution_options(isolation_level="REPEATABLE READ")

    @contextlib.asynccontextmanager
    async def connection(self, engine: AsyncEngine) -> AsyncIterator[Any]:
        async with engine.connect() as conn:
            raw = await conn.get_raw_connection()
            try:
                yield raw.driver_connection
            except BaseException as error:
                # SQLAlchemy sees no error raised by the driver connection itself: a dead
                # one would go back to the pool and fail every request that draws it.
                if connection_lost(error):
                    await conn.invalidate()
                raise


@dataclass(frozen=True)
class AsyncpgStatement:
    """A statement written once in SQLAlchemy Core, as asyncpg runs it: its text, with
    numbered parameters, and the names of those parameters in their order."""

    text: str
    names: tuple[str, ...]
    constants: Mapping[str, Any]  # the values the statement holds itself

    def args(self, params: Mapping[str, Any]) -> list[Any]:
        """The positional arguments of ``params``, by name (the statement's own values for
        the names it holds)."""
        return [params[n] if n in params else self.constants[n] for n in self.names]


_ASYNCPG = PGDialect_asyncpg()  # type: ignore[no-untyped-call]  # SQLAlchemy's own, untyped


def for_asyncpg(statement: sa.ClauseElement) -> AsyncpgStatement:
    """``statement`` rendered by SQLAlchemy for asyncpg, once: a hot path runs it on the
    driver connection itself, without a second, hand-written text of the same statement."""
    compiled = statement.compile(dialect=_ASYNCPG)
    assert isinstance(compiled, SQLCompiler)
    return AsyncpgStatement(compiled.string, tuple(compiled.positiontup or ()), compiled.params)
