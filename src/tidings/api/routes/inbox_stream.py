"""GET /v1/users/{id}/inbox/stream: a user's feed live, as Server-Sent Events (docs/inbox.md,
Live updates).

Events: ``message`` (a new message, its ``id:`` the message id) and ``counts`` (after each
change, and first thing on connect); a comment line every ``inbox.heartbeat_seconds`` when
idle. ``Last-Event-ID`` (the id of the last message a client got) resumes: the messages
stored since are sent first. A stream holds one wake-up event and the id of the last
message it sent, whatever the traffic; streams are capped per user and per process (429).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Header, Request
from fastapi.responses import StreamingResponse

from tidings.api.auth import Scope, user_routes
from tidings.api.deps import service_of
from tidings.api.routes.inbox import User, item_json, registered
from tidings.api.schemas import ErrorResponse
from tidings.refusal import Refusal
from tidings.service import Service
from tidings.services import inbox
from tidings.services.inbox import StreamsFull

router = APIRouter(prefix="/v1/users", tags=["inbox"])
# Messages sent per look: a stream resumed after a long absence catches up in steps.
BATCH = 100
_SSE: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "events: counts, then message and counts as they change",
        "content": {"text/event-stream": {"schema": {"type": "string"}}},
    },
    401: {"model": ErrorResponse},
    404: {"model": ErrorResponse},
    429: {"model": ErrorResponse},
}


@router.get(
    "/{user_id}/inbox/stream",
    response_class=StreamingResponse,
    responses=_SSE,
    dependencies=user_routes(Scope.READ, query_token=True),
)
async def stream(
    request: Request,
    user_id: User,
    last_event_id: Annotated[str | None, Header(max_length=100)] = None,
) -> StreamingResponse:
    """The user's new messages and counts as they change. The token may come as
    ``?token=`` (EventSource sends no headers): give such a short-lived one."""
    service = service_of(request)
    after = _last_id(last_event_id)
    await registered(request, user_id)
    try:
        wake = service.inbox_wakeup.subscribe(user_id)
    except StreamsFull as full:
        raise Refusal(
            "too_many_streams",
            f"{full}; close one or retry later",
            None,
            429,
            {"Retry-After": "5"},
        ) from None
    if after is None:
        try:
            after = await inbox.newest_id(service, user_id)
        except BaseException:
            service.inbox_wakeup.unsubscribe(user_id, wake)
            raise
    headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
    return StreamingResponse(
        _events(service, user_id, wake, after),
        media_type="text/event-stream",
        headers=headers,
    )


def _last_id(header: str | None) -> uuid.UUID | None:
    if header is None or not header.strip():
        return None
    try:
        return uuid.UUID(header.strip())
    except ValueError:
        raise Refusal(
            "invalid_request", "Last-Event-ID is not a message id", "Last-Event-ID"
        ) from None


async def _events(
    service: Service, user_id: str, wake: asyncio.Event, after: uuid.UUID
) -> AsyncIterator[str]:
    heartbeat = service.settings.inbox.heartbeat_seconds
    try:
        yield "retry: 2000\n\n"
        yield _event("counts", _counts(await inbox.counts_of(service, user_id)))
        while True:
            sent = 0
            for message in await inbox.newer(service, user_id, after, BATCH):
                after = message.id
                sent += 1
                yield _event("message", item_json(message), str(message.id))
            changed = sent or wake.is_set()
            wake.clear()
            if changed:
                yield _event("counts", _counts(await inbox.counts_of(service, user_id)))
            if sent == BATCH:
                continue  # more to catch up on
            try:
                async with asyncio.timeout(heartbeat):
                    await wake.wait()
            except TimeoutError:
                yield ": heartbeat\n\n"
    finally:
        service.inbox_wakeup.unsubscribe(user_id, wake)


def _event(name: str, data: dict[str, Any], event_id: str | None = None) -> str:
    head = f"id: {event_id}\n" if event_id else ""
    return f"{head}event: {name}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"


def _counts(counts: inbox.Counts) -> dict[str, int]:
    return {"unseen": counts.unseen, "unread": counts.unread, "total": counts.total}
