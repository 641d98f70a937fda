"""The dead-letter queue: GET /v1/dead-letters (filtered), POST /v1/dead-letters/replay (in
bulk), POST /v1/deliveries/{id}/replay."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request

from tidings.api.auth import Scope, caller_of, needs
from tidings.api.deps import service_of
from tidings.api.errors import error_response
from tidings.api.masking import mask_address
from tidings.api.schemas import (
    BulkReplayed,
    BulkReplayIn,
    DeadLetter,
    ErrorResponse,
    Moment,
    Replayed,
)
from tidings.refusal import Refusal
from tidings.services import deadletters
from tidings.services.deadletters import DEAD_KINDS, DeadFilter, Replay
from tidings.states import FailureKind

router = APIRouter(prefix="/v1", tags=["dead letters"], dependencies=needs(Scope.ADMIN))
_INVALID: dict[int | str, dict[str, Any]] = {422: {"model": ErrorResponse}}


def dead_filter(
    kinds: list[FailureKind] | None,
    type: str | None,
    error: str | None,
    since: datetime | None,
    until: datetime | None,
) -> DeadFilter:
    """The filter the parameters ask for (the API's and the dashboard's)."""
    for name, moment in (("from", since), ("to", until)):
        if moment is not None and moment.tzinfo is None:
            raise Refusal("invalid_request", f"{name}: give a time zone (Z or +hh:mm)", name)
    if since is not None and until is not None and until <= since:
        raise Refusal("invalid_request", "to: must be after from", "to")
    found = [k.value for k in kinds] if kinds else DEAD_KINDS
    return DeadFilter(found, type, error, since, until)


@router.get("/dead-letters", response_model=list[DeadLetter])
async def list_dead_letters(
    request: Request,
    kind: Annotated[list[FailureKind] | None, Query()] = None,
    type: Annotated[str | None, Query(min_length=1, max_length=100)] = None,
    error: Annotated[str | None, Query(min_length=1, max_length=200)] = None,
    since: Annotated[Moment | None, Query(alias="from")] = None,
    until: Annotated[Moment | None, Query(alias="to")] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> Any:
    """Failed deliveries (exhausted, poison and ambiguous by default), newest first; by
    notification type, a text in the last error, and when they failed (``from``
    included, ``to`` excluded)."""
    found = dead_filter(kind, type, error, since, until)
    namespace = caller_of(request).namespace
    rows = await deadletters.listed(service_of(request).db, namespace, limit=limit, found=found)
    return [dead_letter(row) for row in rows]


@router.post("/dead-letters/replay", response_model=BulkReplayed, responses=_INVALID)
async def replay_dead_letters(request: Request, body: BulkReplayIn) -> Any:
    """Replay, newest first, up to ``limit`` (at most 1,000) dead letters the filter
    matches (the same fields as the list's), each with fresh attempts."""
    found = dead_filter(body.kind, body.type, body.error, body.since, body.until)
    replayed, changed = await deadletters.replay_matching(
        service_of(request), caller_of(request).namespace, found, body.limit
    )
    return BulkReplayed(replayed=replayed, changed=changed)


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
