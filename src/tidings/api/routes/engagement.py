"""GET /t/o/{token} (the open pixel) and GET /t/c/{token} (a tracked link): docs/tracking.md.

Both answer at once and never fail the recipient: a valid token is recorded and answered
(the GIF, or a 302 to the very URL the token signs, as a URI); a forged, altered or expired
one is 404, never a redirect. The token is the rest of the path, slashes included, so that
no other route (nor a trailing-slash redirect) answers for a link of ours.
"""

from __future__ import annotations

import base64
import logging
import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Path, Request, Response

from tidings.api.auth import PUBLIC
from tidings.api.deps import service_of
from tidings.api.errors import error_response
from tidings.services import engagement
from tidings.tracking.engagement_links import InvalidToken
from tidings.tracking.uris import as_uri
from tidings.tracking.user_agents import MACHINE, agent_class

log = logging.getLogger(__name__)
router = APIRouter(prefix="/t", tags=["tracking"], dependencies=PUBLIC)

PIXEL = base64.b64decode("R0lGODlhAQABAIAAAP///wAAACH5BAEAAAAALAAAAAABAAEAAAICRAEAOw==")
_NO_STORE = {"Cache-Control": "no-store, private", "Referrer-Policy": "no-referrer"}
# Unbounded here: reading a token refuses one too long, as 404 like any other bad token.
Token = Annotated[str, Path(description="the signed token of the link")]
# Read, not declared: a recipient's client never gets a 4xx for its User-Agent (a long
# one is classified by its start; it is never stored).
_AGENT_CHARS = 1000
_NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"description": "not a valid link"}}


async def _record(
    request: Request, delivery_id: uuid.UUID, kind: str, detail: dict[str, Any]
) -> None:
    try:
        await engagement.record(service_of(request).db, delivery_id, kind, detail)
    except Exception as error:
        # The recipient gets the image or the page anyway; the count is what is lost.
        log.warning(
            "could not record %s of delivery %s: %s", kind, delivery_id, type(error).__name__
        )


def _agent(request: Request) -> str:
    return agent_class(request.headers.get("user-agent", "")[:_AGENT_CHARS])


def _invalid(error: InvalidToken) -> Response:
    return error_response(404, "invalid_link", str(error), "token")


@router.get(
    "/o/{token:path}",
    response_class=Response,
    responses={200: {"content": {"image/gif": {}}, "description": "a 1x1 GIF"}, **_NOT_FOUND},
)
async def open_pixel(request: Request, token: Token) -> Response:
    """The open pixel: records ``opened`` (with the client's class) and answers a 1x1 GIF."""
    try:
        delivery_id = service_of(request).engagement.read_open(token)
    except InvalidToken as error:
        return _invalid(error)
    agent = _agent(request)
    await _record(
        request, delivery_id, engagement.OPENED, {"agent": agent, "machine": agent in MACHINE}
    )
    return Response(PIXEL, media_type="image/gif", headers=_NO_STORE)


@router.get(
    "/c/{token:path}",
    response_class=Response,
    status_code=302,
    responses={302: {"description": "to the link's URL"}, **_NOT_FOUND},
)
async def click(request: Request, token: Token) -> Response:
    """A tracked link: records ``clicked`` (with its URL) and redirects to that URL."""
    try:
        found = service_of(request).engagement.read_click(token)
    except InvalidToken as error:
        return _invalid(error)
    agent = _agent(request)
    detail = {"url": found.url, "agent": agent, "machine": agent in MACHINE}
    await _record(request, found.delivery_id, engagement.CLICKED, detail)
    # The history keeps the URL as the message held it; the header needs its URI form.
    return Response(status_code=302, headers={"Location": as_uri(found.url), **_NO_STORE})
