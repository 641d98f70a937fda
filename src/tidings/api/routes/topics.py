"""Topics, who follows what: PUT /v1/topics/{topic}/subscribers and its neighbours.

A topic exists while someone follows it: one nobody follows answers 404.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Request, Response

from tidings.api.auth import Scope, needs
from tidings.api.deps import service_of
from tidings.api.errors import error_response
from tidings.api.schemas import (
    ErrorResponse,
    SubscribersAdded,
    SubscribersIn,
    Topic,
    TopicOut,
    UserTopicsOut,
)
from tidings.intake.requests import UserId
from tidings.services import topics

router = APIRouter(prefix="/v1", tags=["topics"], dependencies=needs(Scope.USERS))
_NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"model": ErrorResponse}}
_INVALID: dict[int | str, dict[str, Any]] = {422: {"model": ErrorResponse}}
# Writes take the topic as ":path", so that one holding "/" (%2F) reaches the route and is
# refused by name (422), where a plain segment would leave it to the router's bare 404. The
# GET does not: it would also match GET .../subscribers, which must stay a 405.
TopicPath = Annotated[Topic, Path()]
UserPath = Annotated[UserId, Path()]


@router.put("/topics/{topic:path}/subscribers", response_model=SubscribersAdded, responses=_INVALID)
async def add_subscribers(request: Request, topic: TopicPath, body: SubscribersIn) -> Any:
    """Add users to a topic; users already following it are left as they are."""
    added, total = await topics.subscribe(service_of(request).db, topic, body.user_ids)
    return SubscribersAdded(topic=topic, added=added, subscribers=total)


@router.delete(
    "/topics/{topic:path}/subscribers/{user_id}",
    status_code=204,
    responses={**_NOT_FOUND, **_INVALID},
)
async def remove_subscriber(request: Request, topic: TopicPath, user_id: UserPath) -> Response:
    if not await topics.unsubscribe(service_of(request).db, topic, user_id):
        return error_response(404, "not_found", f"{user_id!r} does not follow {topic!r}")
    return Response(status_code=204)


@router.get("/topics/{topic}", response_model=TopicOut, responses={**_NOT_FOUND, **_INVALID})
async def get_topic(request: Request, topic: TopicPath) -> Any:
    subscribers = await topics.subscribers(service_of(request).db, topic)
    if subscribers == 0:
        return error_response(404, "not_found", f"nobody follows {topic!r}", "topic")
    return TopicOut(topic=topic, subscribers=subscribers)


@router.get("/users/{user_id}/topics", response_model=UserTopicsOut, responses=_INVALID)
async def get_user_topics(request: Request, user_id: UserPath) -> Any:
    """The topics a user follows, sorted (empty for a user who follows none)."""
    found = await topics.topics_of(service_of(request).db, user_id)
    return UserTopicsOut(user_id=user_id, topics=found)
