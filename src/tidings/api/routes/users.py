"""Users as a set: GET /v1/users (paged, by id prefix or attribute), POST /v1/users/batch,
and erasure, DELETE /v1/users/{id}."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request

from tidings.api import cursors
from tidings.api.auth import Scope, needs
from tidings.api.deps import service_of
from tidings.api.routes.registry import user_out
from tidings.api.schemas import ErasedOut, ErrorResponse, UserBatchIn, UserBatchOut, UserPage
from tidings.intake.requests import UserId
from tidings.refusal import Refusal
from tidings.services import users

router = APIRouter(prefix="/v1", tags=["users"], dependencies=needs(Scope.USERS))
_INVALID: dict[int | str, dict[str, Any]] = {422: {"model": ErrorResponse}}


def _attribute(name: str | None, value: str | None) -> tuple[str, str] | None:
    if name is None and value is None:
        return None
    if name is None:
        raise Refusal("invalid_request", "attribute: give the attribute equals names", "attribute")
    if value is None:
        raise Refusal("invalid_request", "equals: give the value attribute must equal", "equals")
    return name, value


@router.get("/users", response_model=UserPage, responses=_INVALID)
async def list_users(
    request: Request,
    id_prefix: Annotated[str | None, Query(alias="idPrefix", min_length=1, max_length=255)] = None,
    attribute: Annotated[str | None, Query(min_length=1, max_length=100)] = None,
    equals: Annotated[str | None, Query(max_length=255)] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    after: Annotated[str | None, Query(max_length=400)] = None,
) -> Any:
    """Profiles in id order, a page at a time: those whose id starts with ``idPrefix``
    and whose ``attribute`` (``email``, ``phone``, ``timezone``, ``locale``, or a key of
    ``attributes``) equals ``equals`` (compared as text)."""
    start = cursors.decode(after, 1)[0] if after else None
    found = await users.list_users(
        service_of(request).db,
        limit=limit + 1,
        prefix=id_prefix,
        attribute=_attribute(attribute, equals),
        after=start,
    )
    more = len(found) > limit
    found = found[:limit]
    last = cursors.encode(found[-1].id) if more else None
    return UserPage(users=[user_out(profile) for profile in found], next=last)


@router.post("/users/batch", response_model=UserBatchOut, responses=_INVALID)
async def put_users(request: Request, body: UserBatchIn) -> Any:
    """Create or replace up to 1,000 profiles, all or none (one transaction); quiet hours
    and creation times are kept on replace, as ``PUT /v1/users/{id}`` keeps them."""
    rows = [user.model_dump(mode="json") for user in body.users]
    created, replaced = await users.put_users(service_of(request).db, rows)
    return UserBatchOut(created=created, replaced=replaced)


@router.delete("/users/{user_id}", response_model=ErasedOut, responses=_INVALID)
async def erase_user(request: Request, user_id: Annotated[UserId, Path()]) -> Any:
    """Erase a user (GDPR/LGPD): their profile, devices, preferences, topics, frequency
    counters, inbox and SMS replies are deleted, and their addresses in stored deliveries,
    histories, notifications' data and the suppression list are replaced by a one-way hash
    (a suppressed address stays suppressed). Answers what it erased; again, zeros."""
    erased = await users.erase_user(service_of(request).db, user_id)
    return ErasedOut.model_validate(erased, from_attributes=True)
