"""Liveness and readiness."""

from __future__ import annotations

from typing import Any

import redis.asyncio as aioredis
from fastapi import APIRouter, Request
from redis.exceptions import RedisError

from tidings.api.auth import PUBLIC
from tidings.api.errors import error_response
from tidings.api.schemas import ErrorResponse
from tidings.dispatch.lanes.progress import stalled_lanes
from tidings.service import Service
from tidings.services import health
from tidings.services.health import WriteProbe

router = APIRouter(tags=["health"], dependencies=PUBLIC)


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
        schema = await health.schema(service.db)
    except health.Unreachable as error:
        return error_response(503, "database_unreachable", f"database unreachable: {error}")
    current, head = schema.current, schema.head
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
        # restarting itself (dispatch/lanes/progress.py); a worker's lanes show in /v1/providers.
        names = ", ".join(f"{lane['transport']} {lane['priority']}" for lane in stalled)
        return error_response(503, "lane_stalled", f"stalled lanes: {names}")
    answer: dict[str, Any] = {"status": "ready", "schema": current}
    if service.settings.redis_url:
        # Not a reason to be unready: without Redis, dispatchers fall back to their own
        # share of each rate (docs/architecture.md, Many dispatchers).
        answer["redis"] = await redis_state(service.settings.redis_url)
    return answer


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
