"""POST /v1/notifications/cancel (a workflow's steps, by cancelKey) and
POST /v1/deliveries/{id}/engagement (an open or click the app saw): docs/workflows.md."""

from __future__ import annotations

import uuid
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Request
from pydantic import Field, StringConstraints

from tidings.api.auth import Scope, caller_of, needs
from tidings.api.deps import service_of
from tidings.api.errors import error_response
from tidings.api.schemas import ErrorResponse
from tidings.intake.requests import ApiModel
from tidings.services import workflows

router = APIRouter(prefix="/v1", tags=["workflows"])
_SEND = needs(Scope.SEND)


class CancelIn(ApiModel):
    cancel_key: Annotated[str, StringConstraints(min_length=1, max_length=255)]


class Cancelled(ApiModel):
    cancelled: int = Field(description="notifications whose pending steps were cancelled")


class EngagementIn(ApiModel):
    event: Literal["opened", "clicked"]


class EngagementRecorded(ApiModel):
    delivery_id: uuid.UUID
    event: str


@router.post(
    "/notifications/cancel",
    response_model=Cancelled,
    responses={422: {"model": ErrorResponse}},
    dependencies=_SEND,
)
async def cancel(request: Request, body: CancelIn) -> Any:
    """End every step not yet run of this namespace's notifications that carry
    ``cancelKey`` (CANCELLED); a step running at this moment finishes, nothing after it."""
    namespace = caller_of(request).namespace
    count = await workflows.cancel(service_of(request).db, namespace, body.cancel_key)
    return Cancelled(cancelled=count)


@router.post(
    "/deliveries/{delivery_id}/engagement",
    status_code=202,
    response_model=EngagementRecorded,
    responses={404: {"model": ErrorResponse}, 422: {"model": ErrorResponse}},
    dependencies=_SEND,
)
async def engagement(request: Request, delivery_id: uuid.UUID, body: EngagementIn) -> Any:
    """The app saw the recipient open (or click) a push or an SMS link: an event in the
    delivery's history and the event log, which an ``unless`` of a later step reads."""
    db = service_of(request).db
    namespace = caller_of(request).namespace
    if not await workflows.record_engagement(db, namespace, delivery_id, body.event):
        return error_response(404, "not_found", f"no delivery {delivery_id}", "id")
    return EngagementRecorded(delivery_id=delivery_id, event=body.event)
