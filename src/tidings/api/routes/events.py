"""GET /v1/events: every status change and tracking event of the caller's namespace, in
the log's order (each delivery's in the order of its changes), a page at a time after a
stable cursor (docs/events.md)."""

from __future__ import annotations

import base64
import binascii
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request

from tidings.api.auth import Scope, caller_of, needs
from tidings.api.deps import service_of
from tidings.api.schemas import EventOut, EventPage
from tidings.refusal import Refusal
from tidings.store import events
from tidings.store.events import TYPES, Cursor, Event

router = APIRouter(prefix="/v1", tags=["events"], dependencies=needs(Scope.READ))


def encode(cursor: Cursor) -> str:
    return base64.urlsafe_b64encode(f"{cursor.txid}.{cursor.id}".encode()).decode().rstrip("=")


def decode(text: str) -> Cursor:
    try:
        padded = text + "=" * (-len(text) % 4)
        txid, number = base64.urlsafe_b64decode(padded.encode()).decode().split(".")
        found = Cursor(int(txid), int(number))
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise Refusal(
            "invalid_cursor", "after is not a cursor this API gave (use next)", "after"
        ) from None
    if found.txid < 0 or found.id < 0:
        raise Refusal("invalid_cursor", "after is not a cursor this API gave (use next)", "after")
    return found


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
