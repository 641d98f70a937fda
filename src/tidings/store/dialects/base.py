"""The dialect seam's types: the ``Dialect`` protocol and ``Variants`` (see __init__.py)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

if TYPE_CHECKING:
    from tidings.store.engine import Database

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Variants(Generic[T]):
    """One operation written once per dialect (a function, a statement, a small table of
    them), side by side where the operation lives; ``of(db)`` is the database's own."""

    postgres: T
    sqlite: T

    def of(self, db: Database) -> T:
        return db.dialect.pick(self)


class Dialect(Protocol):
    @property
    def name(self) -> str:
        """SQLAlchemy's name of the dialect, for logs and reports."""

    @property
    def server(self) -> bool:
        """A server that may be unreachable when a process starts (a file is there)."""

    @property
    def partitions(self) -> bool:
        """Day partitions can exist (store/partitions.py)."""

    @property
    def notifies(self) -> bool:
        """Processes wake each other through the database (LISTEN/NOTIFY, store/wakeup.py)."""

    def make_engine(self, url: sa.URL, pool_size: int) -> AsyncEngine:
        """The engine, with this dialect's connection set-up."""

    def pick(self, variants: Variants[T]) -> T:
        """This dialect's member of ``variants``."""

    def insert(self, table: sa.Table) -> Any:
        """The dialect's INSERT, which has ``on_conflict_do_*`` (both speak ON CONFLICT)."""

    def locked(
        self, query: sa.Select[Any], *, skip_locked: bool = False, of: sa.Table | None = None
    ) -> sa.Select[Any]:
        """``query`` taking the row locks a concurrent writer would (skipping rows another
        holds, with ``skip_locked``): the same query where a transaction holds the whole
        database's write lock from its BEGIN."""

    async def snapshot(self, conn: AsyncConnection) -> AsyncConnection:
        """``conn`` with its statements reading one snapshot of the database."""

    def connection(self, engine: AsyncEngine) -> contextlib.AbstractAsyncContextManager[Any]:
        """A pooled driver connection itself, for the hot paths (PostgreSQL: asyncpg)."""
