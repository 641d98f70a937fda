"""The dead-letter queue: GET /v1/dead-letters, POST /v1/deliveries/{id}/replay."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request

from tidings.api.auth import Scope, caller_of, needs
from tidings.api.deps import service_of
from tidings.api.errors import error_response
from tidings.api.masking import mask_address
from tidings.api.schemas import DeadLetter, ErrorResponse, Replayed
from tidings.services import deadletters
from tidings.services.deadletters import DEAD_KINDS, Replay
from tidings.states import FailureKind

router = APIRouter(prefix="/v1", tags=["dead letters"], dependencies=needs(Scope.ADMIN))


@router.get("/dead-letters", response_model=list[DeadLetter])
async def list_dead_letters(
    request: Request,
    kind: Annotated[list[FailureKind] | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> Any:
    """Failed deliveries (exhausted, poison and ambiguous by default), newest first."""
    kinds = [k.value for k in kind] if kind else DEAD_KINDS
    namespace = caller_of(request).namespace
    rows = await deadletters.listed(service_of(request).db, namespace, kinds, limit)
    return [dead_letter(row) for row in rows]


def dead_letter(row: deadletters.DeadLetter) -> DeadLetter:
    """A failed delivery as the API and the dashboard show it (the address masked)."""
    return DeadLetter(
        id=row.id,
        notification_id=row.notification_id,
        channel=row.channel,
        address=mask_address(row.channel, row.address),
        failure_kind=row.failure_kind,
        last_error=row.last_error,
        attempts=row.attempts,
        failed_at=row.failed_at,
    )


@router.post(
    "/deliveries/{delivery_id}/replay",
    response_model=Replayed,
    responses={404: {"model": ErrorResponse}, 409: {"model": ErrorResponse}},
)
async def replay_delivery(request: Request, delivery_id: uuid.UUID) -> Any:
    """Send a FAILED delivery again, with a fresh set of attempts."""
    namespace = caller_of(request).namespace
    outcome = await deadletters.replay(service_of(request), delivery_id, namespace)
    if outcome is Replay.NOT_FOUND:
        return error_response(404, "not_found", f"no delivery {delivery_id}", "id")
    if outcome is Replay.NOT_FAILED:
        message = f"delivery {delivery_id} is not FAILED; only failed deliveries can be replayed"
        return error_response(409, "not_failed", message, "id")
    return Replayed(id=delivery_id, status="PENDING")
