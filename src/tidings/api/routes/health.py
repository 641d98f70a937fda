"""Liveness and readiness."""

from __future__ import annotations

from typing import Any

import redis.asyncio as aioredis
import sqlalchemy as sa
from fastapi import APIRouter, Request
from redis.exceptions import RedisError

from tidings.api.auth import PUBLIC
from tidings.api.errors import error_response
from tidings.api.schemas import ErrorResponse
from tidings.service import Service
from tidings.store.migrate import current_revision, head_revision

router = APIRouter(tags=["health"], dependencies=PUBLIC)


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process is alive."""
    return {"status": "ok"}


@router.get("/readyz", responses={503: {"model": ErrorResponse, "description": "not ready"}})
async def readyz(request: Request) -> Any:
    """Ready when the database answers and its schema is at the latest migration."""
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
    answer: dict[str, Any] = {"status": "ready", "schema": current}
    if service.settings.redis_url:
        # Not a reason to be unready: without Redis, dispatchers fall back to their own
        # share of each rate (docs/architecture.md, Many dispatchers).
        answer["redis"] = await redis_state(service.settings.redis_url)
    return answer


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
