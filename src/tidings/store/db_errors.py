"""Which database errors are about one request's values, and which about the database.

The intake's hot path talks to asyncpg directly (``Database.asyncpg``), so its errors arrive
unwrapped by SQLAlchemy: both kinds are recognised here.
"""

from __future__ import annotations

import asyncpg
import asyncpg.exceptions
import sqlalchemy as sa
from asyncpg.exceptions import _base as asyncpg_base

# SQLSTATE classes that mean "the database cannot serve us now": connection exceptions,
# insufficient resources (too many connections), operator intervention (shutting down).
_UNAVAILABLE_CLASSES = ("08", "53", "57")
# Data exceptions (a value the column or type cannot hold, NUL in text), NOT NULL and CHECK
# violations: the request's fault, not the database's.
_UNSTORABLE_STATES = ("22", "23502", "23514")


# What asyncpg raises on a connection the server ended: a pooled connection that raised one
# must be discarded, not handed to the next request.
_CONNECTION_LOST = (
    asyncpg.exceptions.InterfaceError,
    asyncpg_base.InternalClientError,  # "cannot switch to state ..." after a broken operation
    asyncpg.PostgresConnectionError,
    ConnectionError,
)


def connection_lost(exc: BaseException) -> bool:
    return isinstance(exc, _CONNECTION_LOST) and not isinstance(exc, asyncpg_base.DataError)


def _sqlstate(exc: BaseException | None) -> str:
    state = getattr(exc, "sqlstate", None)
    return state if isinstance(state, str) else ""


def unavailable(exc: BaseException) -> bool:
    """The database is down, restarting or out of connections: answer 503, retry later."""
    if isinstance(exc, sa.exc.DBAPIError):
        if isinstance(exc, sa.exc.OperationalError | sa.exc.InterfaceError):
            return True
        return exc.connection_invalidated or _sqlstate(exc.orig)[:2] in _UNAVAILABLE_CLASSES
    if isinstance(exc, asyncpg_base.DataError):  # a value asyncpg could not encode
        return False
    if isinstance(exc, _CONNECTION_LOST):
        return True  # "connection is closed", "connection was closed in the middle of ..."
    return _sqlstate(exc)[:2] in _UNAVAILABLE_CLASSES


def unstorable(exc: BaseException) -> bool:
    """The database (or its driver) refused a value of the request itself."""
    if isinstance(exc, sa.exc.StatementError) and exc.orig is not None:
        exc = exc.orig
    if isinstance(exc, asyncpg_base.DataError | UnicodeError | OverflowError):
        return True
    if isinstance(exc, sa.exc.DBAPIError):
        exc = exc.orig if exc.orig is not None else exc
    return isinstance(exc, asyncpg.PostgresError | sa.exc.DBAPIError) and (
        _sqlstate(exc).startswith(_UNSTORABLE_STATES) or isinstance(exc, sa.exc.DataError)
    )
