"""GET and POST /u/{token}: one-click unsubscribe (RFC 8058) and its confirmation page.

GET only shows a page with a button: mail scanners follow links, and must not unsubscribe
anyone. POST (the button, or a mail client's one-click request) switches the category off
and, for a link that names its delivery, records ``unsubscribed`` in that delivery's history
once (the event the reports and producers hear of). Both pages of a user's link lead to
the user's preference center (``/p/{token}``), to choose more finely than one switch.
"""

from __future__ import annotations

import logging
import uuid
from html import escape
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from tidings.api.auth import PUBLIC
from tidings.policy.unsubscribe import InvalidToken, Unsubscribe
from tidings.service import Service
from tidings.services import unsubscribe as unsubscribing

log = logging.getLogger(__name__)
router = APIRouter(tags=["unsubscribe"], dependencies=PUBLIC)
_HTML: dict[str, Any] = {"text/html": {"schema": {"type": "string"}}}
_INVALID_LINK: dict[int | str, dict[str, Any]] = {
    400: {"description": "the link is not valid or was altered", "content": _HTML}
}

_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<meta name="viewport" content="width=device-width, initial-scale=1"></head>
<body style="font-family: sans-serif; max-width: 32rem; margin: 4rem auto; padding: 0 1rem">
<h1>{title}</h1><p>{text}</p>{form}</body></html>"""


def _page(title: str, text: str, form: str = "", status_code: int = 200) -> HTMLResponse:
    body = _PAGE.format(title=escape(title), text=escape(text), form=form)
    return HTMLResponse(body, status_code=status_code)


def _more(request: Request, wanted: Unsubscribe) -> str:
    """A link to the user's preference center (a bare address has none)."""
    if wanted.user_id is None:
        return ""
    service: Service = request.app.state.service
    token = service.preference_links.token(wanted.user_id)
    return f'<p><a href="/p/{escape(token)}">Manage all your notification preferences</a></p>'


def _read(request: Request, token: str) -> Unsubscribe:
    service: Service = request.app.state.service
    return service.unsubscriber.read(token)


def _invalid() -> HTMLResponse:
    return _page(
        "Link not valid", "This unsubscribe link is not valid or was altered.", status_code=400
    )


@router.get("/u/{token}", response_class=HTMLResponse, responses=_INVALID_LINK)
async def confirm_unsubscribe(request: Request, token: str) -> HTMLResponse:
    """A confirmation page; it never unsubscribes by itself."""
    try:
        wanted = _read(request, token)
    except InvalidToken:
        return _invalid()
    form = (
        f'<form method="post" action="/u/{escape(token)}">'
        '<button type="submit">Unsubscribe</button></form>'
    ) + _more(request, wanted)
    text = f"Stop receiving {wanted.category} messages by {wanted.channel}?"
    return _page("Unsubscribe", text, form)


@router.post("/u/{token}", response_class=HTMLResponse, responses=_INVALID_LINK)
async def unsubscribe(request: Request, token: str) -> HTMLResponse:
    """Switch the category off on that channel (or suppress a bare address)."""
    try:
        wanted = _read(request, token)
    except InvalidToken:
        return _invalid()
    service: Service = request.app.state.service
    await unsubscribing.switch_off(service.db, wanted)
    if wanted.delivery_id is not None:
        await _record(service, wanted.delivery_id, wanted)
    text = f"You will no longer receive {wanted.category} messages by {wanted.channel}."
    return _page("Unsubscribed", text, _more(request, wanted))


async def _record(service: Service, delivery_id: uuid.UUID, wanted: Unsubscribe) -> None:
    """The unsubscribe in its delivery's history; it stands even when this fails."""
    try:
        await unsubscribing.record(service.db, delivery_id, wanted)
    except Exception as error:
        log.warning(
            "could not record the unsubscribe of delivery %s: %s",
            delivery_id,
            type(error).__name__,
        )
