"""The inbox feed (docs/inbox.md): a user's messages with their counts, their state changes,
and the user tokens browsers call these routes with.

Every feed route takes a server key (``read`` to read, ``send`` to change) or the user's
own token, never another user's (``auth.UserOrScope``). Tokens are minted with a server key.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query, Request

from tidings.api import cursors
from tidings.api.auth import Scope, needs, user_routes
from tidings.api.deps import service_of
from tidings.api.schemas import (
    ErrorResponse,
    InboxAllChanged,
    InboxCounts,
    InboxFeedOut,
    InboxItemChanged,
    InboxItemOut,
    InboxTokenOut,
)
from tidings.intake.requests import UserId
from tidings.refusal import Refusal
from tidings.services import inbox
from tidings.services.inbox import Counts, InboxMessage

router = APIRouter(prefix="/v1/users", tags=["inbox"])
_ERRORS: dict[int | str, dict[str, Any]] = {code: {"model": ErrorResponse} for code in (404, 422)}
User = Annotated[UserId, Path()]


@router.get(
    "/{user_id}/inbox",
    response_model=InboxFeedOut,
    responses=_ERRORS,
    dependencies=user_routes(Scope.READ),
)
async def read_feed(
    request: Request,
    user_id: User,
    status: Literal["all", "unread", "unseen", "archived"] = "all",
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    after: Annotated[str | None, Query(max_length=100)] = None,
) -> Any:
    """The user's messages, newest first (``archived``: only those; the others leave them
    out), ``limit`` at a time; ``next`` given back as ``after`` reads on, never skipping or
    repeating one. ``counts`` are of the messages not archived."""
    since = cursors.identifier(cursors.decode(after, 1)[0]) if after else None
    await registered(request, user_id)
    found = await inbox.feed(service_of(request), user_id, status, limit, since)
    return InboxFeedOut(
        items=[_item(m) for m in found.items],
        next=cursors.encode(str(found.next)) if found.next else None,
        counts=_counts(found.counts),
    )


@router.post(
    "/{user_id}/inbox/{item_id}/{action}",
    response_model=InboxItemChanged,
    responses=_ERRORS,
    dependencies=user_routes(Scope.SEND),
)
async def change_item(
    request: Request,
    user_id: User,
    item_id: Annotated[str, Path(max_length=100)],
    action: Literal["seen", "read", "unread", "archive", "unarchive"],
) -> Any:
    """Mark one message; marking it as it already is changes nothing. Seen and read are
    recorded in the delivery's history and the event log (``inbox.seen``, ``inbox.read``)."""
    message_id = _message_id(item_id)
    await registered(request, user_id)
    found = await inbox.change_one(service_of(request), user_id, message_id, action)
    if found is None:
        raise Refusal("not_found", f"user {user_id!r} has no inbox item {item_id}", "itemId", 404)
    message, counts = found
    return InboxItemChanged(item=_item(message), counts=_counts(counts))


@router.post(
    "/{user_id}/inbox/{action}",
    response_model=InboxAllChanged,
    responses=_ERRORS,
    dependencies=user_routes(Scope.SEND),
)
async def change_all(
    request: Request, user_id: User, action: Literal["read-all", "seen-all"]
) -> Any:
    """Mark every message of the user read (or seen)."""
    await registered(request, user_id)
    changed, counts = await inbox.change_all(
        service_of(request), user_id, inbox.ALL_CHANGES[action]
    )
    return InboxAllChanged(changed=changed, counts=_counts(counts))


@router.post(
    "/{user_id}/inbox-token",
    response_model=InboxTokenOut,
    responses=_ERRORS,
    dependencies=needs(Scope.SEND),
)
async def mint_token(request: Request, user_id: User) -> Any:
    """A token for the user's browser: it reads and marks this user's feed (and no other
    user's, nor any other route) until ``expiresAt`` (``inbox.token_seconds``, 1 hour)."""
    await registered(request, user_id)
    issued = inbox.mint_token(service_of(request), user_id)
    return InboxTokenOut(token=issued.token, user_id=issued.user_id, expires_at=issued.expires_at)


async def registered(request: Request, user_id: str) -> None:
    """404 for a user never registered (PUT /v1/users/{id}) or erased: no feed."""
    if not await inbox.is_user(service_of(request), user_id):
        raise Refusal("not_found", f"no user {user_id!r}", "userId", 404)


def _message_id(text: str) -> uuid.UUID:
    try:
        return uuid.UUID(text)
    except ValueError:
        raise Refusal("invalid_request", "itemId is not an inbox item id", "itemId") from None


def _item(message: InboxMessage) -> InboxItemOut:
    return InboxItemOut(
        id=message.id,
        notification_id=message.notification_id,
        type=message.type,
        subject=message.subject,
        text=message.text,
        data=message.data,
        created_at=message.created_at,
        seen_at=message.seen_at,
        read_at=message.read_at,
        archived_at=message.archived_at,
    )


def item_json(message: InboxMessage) -> dict[str, Any]:
    """An item as the feed answers it, as JSON (the stream's ``message`` events)."""
    return _item(message).model_dump(mode="json", by_alias=True)


def _counts(counts: Counts) -> InboxCounts:
    return InboxCounts(unseen=counts.unseen, unread=counts.unread, total=counts.total)
