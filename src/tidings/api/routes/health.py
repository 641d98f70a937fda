"""Liveness and readiness."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from fastapi import APIRouter, Request

from tidings.api.errors import error_response
from tidings.api.schemas import ErrorResponse
from tidings.service import Service
from tidings.store.migrate import current_revision, head_revision

router = APIRouter(tags=["health"])


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
    return {"status": "ready", "schema": current}
