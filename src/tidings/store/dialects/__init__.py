"""The dialect seam: what differs between PostgreSQL and SQLite, in one typed object per
database, chosen once when its engine is made (``dialect_for``).

A ``Dialect`` answers three kinds of question. Capabilities (``server``, ``partitions``,
``notifies``): what the database can do at all. Primitives that render one statement for
both (``insert``'s ON CONFLICT, ``locked``'s row locks, ``snapshot``): the statement is
written once, in SQLAlchemy, and the dialect adds its part. And ``pick``: an operation
whose SQL differs in shape (a claim with SKIP LOCKED through asyncpg, against one
UPDATE ... RETURNING on SQLite) is written once per dialect, side by side in its store
module, as a ``Variants`` pair, and the dialect picks its own. Nothing outside this package
asks which database it is on.
"""

from __future__ import annotations

import sqlalchemy as sa

from tidings.store.dialects.base import Dialect, Variants
from tidings.store.dialects.postgres import Postgres
from tidings.store.dialects.sqlite import Sqlite

__all__ = ["Dialect", "Variants", "dialect_for"]

_DIALECTS: dict[str, Dialect] = {"postgresql": Postgres(), "sqlite": Sqlite()}


def dialect_for(url: sa.URL) -> Dialect:
    """The dialect of ``url``, a URL ``engine.async_url`` accepted."""
    return _DIALECTS[url.get_backend_name()]
