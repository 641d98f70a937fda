"""Liveness and readiness."""

from __future__ import annotations

import logging
import time
from typing import Any

import redis.asyncio as aioredis
import sqlalchemy as sa
from fastapi import APIRouter, Request
from redis.exceptions import RedisError

from tidings.api.auth import PUBLIC
from tidings.api.errors import error_response
from tidings.api.schemas import ErrorResponse
from tidings.dispatch.progress import stalled_lanes
from tidings.service import Service
from tidings.singleflight import SingleFlight
from tidings.store.engine import Database
from tidings.store.migrate import current_revision, head_revision
from tidings.store.write_probe import probe_write

log = logging.getLogger(__name__)

router = APIRouter(tags=["health"], dependencies=PUBLIC)

# How long a write probe's verdict stands (a committed write costs a log flush).
PROBE_SECONDS = 1.5


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process is alive."""
    return {"status": "ok"}


@router.get("/readyz", responses={503: {"model": ErrorResponse, "description": "not ready"}})
async def readyz(request: Request) -> Any:
    """Ready when the database answers, its schema is at the latest migration and it takes
    a write (a probe that commits and leaves nothing, at most every ``PROBE_SECONDS``)."""
    service: Service = request.app.state.service
    try:
        async with service.db.engine.connect() as conn:
            await conn.execute(sa.text("SELECT 1"))
        current = await current_revision(service.db)
    except (OSError, sa.exc.SQLAlchemyError) as error:
        return error_response(
            503, "database_unreachable", f"database unreachable: {type(error).__name__}"
        )
    head = head_revision()
    if current != head:
        return error_response(
            503,
            "migrations_pending",
            f"schema at {current}, latest is {head}: run `tidings migrate`",
        )
    refused = await _write_probe(request.app).refused()
    if refused is not None:
        return error_response(503, "database_refuses_writes", refused)
    stalled = stalled_lanes()
    if stalled:
        # A lane of this process (`tidings serve`) has due work and moves nothing: it is
        # restarting itself (dispatch/progress.py); a worker's lanes show in /v1/providers.
        names = ", ".join(f"{lane['transport']} {lane['priority']}" for lane in stalled)
        return error_response(503, "lane_stalled", f"stalled lanes: {names}")
    answer: dict[str, Any] = {"status": "ready", "schema": current}
    if service.settings.redis_url:
        # Not a reason to be unready: without Redis, dispatchers fall back to their own
        # share of each rate (docs/architecture.md, Many dispatchers).
        answer["redis"] = await redis_state(service.settings.redis_url)
    return answer


class WriteProbe:
    """The last write probe's verdict, for ``PROBE_SECONDS``: a load balancer probing every
    process often costs one committed write per process per interval, and concurrent
    probes share the one in flight."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._at = -PROBE_SECONDS
        self._refused: str | None = None
        self._probe = SingleFlight(self._run)

    async def refused(self) -> str | None:
        """Why the database refuses writes, or None when a write commits."""
        if time.monotonic() - self._at >= PROBE_SECONDS:
            await self._probe()
        return self._refused

    async def _run(self) -> None:
        try:
            await probe_write(self.db)
        except Exception as error:
            # The driver's own error names the cause (asyncpg's ReadOnlySQLTransactionError,
            # DiskFullError); its text goes to the log only, /readyz being public.
            cause = getattr(error, "orig", None) or error
            log.warning("readiness: a write to the database failed: %s", cause)
            self._refused = f"the database refuses writes ({type(cause).__name__})"
        else:
            self._refused = None
        self._at = time.monotonic()


def _write_probe(app: Any) -> WriteProbe:
    probe: WriteProbe | None = getattr(app.state, "write_probe", None)
    if probe is None:
        probe = app.state.write_probe = WriteProbe(app.state.service.db)
    return probe


async def redis_state(url: str) -> str:
    """ "up", or "unreachable (...)" when Redis does not answer a PING within half a second."""
    client = aioredis.Redis.from_url(url, socket_timeout=0.5, socket_connect_timeout=0.5)
    try:
        await client.ping()
    except (RedisError, OSError) as error:
        return f"unreachable ({type(error).__name__}): limits fall back to per-process shares"
    finally:
        await client.aclose()
    return "up"
