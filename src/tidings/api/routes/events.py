"""GET /v1/events: every status change and tracking event of the caller's namespace, in
the log's order (each delivery's in the order of its changes), a page at a time after a
stable cursor (docs/events.md)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request

from tidings.api import cursors
from tidings.api.auth import Scope, caller_of, needs
from tidings.api.deps import service_of
from tidings.api.schemas import EventOut, EventPage
from tidings.refusal import Refusal
from tidings.services import events
from tidings.services.events import TYPES, Cursor, Event

router = APIRouter(prefix="/v1", tags=["events"], dependencies=needs(Scope.READ))


def encode(cursor: Cursor) -> str:
    return cursors.encode(str(cursor.txid), str(cursor.id))


def decode(text: str) -> Cursor:
    txid, number = cursors.decode(text, 2)
    return Cursor(cursors.number(txid), cursors.number(number))


def _types(given: list[str] | None) -> set[str]:
    names = {name.strip() for value in given or () for name in value.split(",") if name.strip()}
    unknown = sorted(names - TYPES)
    if unknown:
        raise Refusal(
            "invalid_request",
            f"types: unknown {', '.join(unknown)} (known: {', '.join(sorted(TYPES))})",
            "types",
        )
    return names


def _out(found: Event) -> EventOut:
    shown = events.payload(found)
    return EventOut(
        id=encode(found.cursor), type=found.type, timestamp=found.at, data=shown["data"]
    )


@router.get("/events", response_model=EventPage)
async def list_events(
    request: Request,
    after: Annotated[str | None, Query(max_length=100)] = None,
    types: Annotated[list[str] | None, Query(max_length=1000)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> Any:
    """Events after ``after`` (a previous page's ``next``), oldest first. ``next`` is the
    cursor to ask with next: past every event this page read, shown or not (so a filter for
    rare events moves on); it stays what was asked with only when nothing new was written."""
    start = decode(after) if after else None
    found = await events.page(
        service_of(request).db, caller_of(request).namespace, start, _types(types), limit
    )
    last = encode(found.next) if found.next else after
    return EventPage(events=[_out(e) for e in found.events], next=last, more=found.more)
