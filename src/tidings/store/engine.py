"""Connecting to the database: URL normalisation, and the dialect chosen once per engine
(store/dialects/)."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from tidings.store.dialects import Dialect, dialect_for

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
    """The engine and its dialect: what the SQL layer needs to know about the database."""

    engine: AsyncEngine
    dialect: Dialect

    @property
    def url(self) -> sa.URL:
        return self.engine.url

    async def dispose(self) -> None:
        await self.engine.dispose()

    def asyncpg(self) -> AbstractAsyncContextManager[Any]:
        """The pooled asyncpg connection itself, for the hot paths (claims, outcomes, intake)
        whose per-row cost in SQLAlchemy's parameter handling would dominate. PostgreSQL
        only."""
        return self.dialect.connection(self.engine)


def connect(url: str, pool_size: int = 10) -> Database:
    """Engines hide statement parameters in errors: addresses and message data must never
    reach a log through an exception's text."""
    target = async_url(url)
    dialect = dialect_for(target)
    return Database(dialect.make_engine(target, pool_size), dialect)
