"""GET and POST /p/{token}: the preference center (docs/inbox.md, The preference center).

The token, signed per user (``policy/preference_links.py``), is the page's only key, as an
unsubscribe link's is. The page is a plain HTML form (no script), in the user's language
(else the browser's); its POST carries a nonce bound to the link and signed with the time
the page was shown, so a form posted from another site, or a replayed old one, is refused
(403). What it saves goes through the preferences service, as the API's PUT does, and so
applies to what is already queued.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from tidings.api.auth import PUBLIC
from tidings.api.deps import service_of
from tidings.api.preference_center import form, pages, texts
from tidings.policy.preference_links import ExpiredLink, InvalidLink
from tidings.service import Service
from tidings.services import preferences
from tidings.services.preferences import Shown

router = APIRouter(tags=["preferences"], dependencies=PUBLIC)
_HTML: dict[str, Any] = {"text/html": {"schema": {"type": "string"}}}
_PAGES: dict[int | str, dict[str, Any]] = {
    400: {"description": "the link is not valid or was altered; or a field is", "content": _HTML},
    403: {"description": "the form's nonce is missing, wrong or too old", "content": _HTML},
    404: {"description": "the link's user no longer exists", "content": _HTML},
    410: {"description": "the link has expired", "content": _HTML},
}


class _Refused(Exception):
    def __init__(self, response: HTMLResponse) -> None:
        self.response = response


async def _open(request: Request, token: str) -> tuple[str, Shown, str]:
    """The link's user, what applies to them and the page's language; ``_Refused`` with
    the page to answer when the link is no good."""
    service = service_of(request)
    browser = texts.language(None, request.headers.get("accept-language"))
    try:
        user_id = service.preference_links.user_of(token)
    except ExpiredLink:
        raise _Refused(pages.message_page(browser, "expired", 410)) from None
    except InvalidLink:
        raise _Refused(pages.message_page(browser, "invalid", 400)) from None
    shown = await preferences.shown(service, user_id)
    if shown is None:
        raise _Refused(pages.message_page(browser, "missing", 404))
    lang = texts.language(shown.locale, request.headers.get("accept-language"))
    return user_id, shown, lang


async def _channels(service: Service) -> list[str]:
    return form.channels_shown((await service.types.all()).values())


@router.get("/p/{token}", response_class=HTMLResponse, responses=_PAGES)
async def preference_page(request: Request, token: str) -> HTMLResponse:
    """The user's categories x channels as switches, quiet hours, time zone and language."""
    try:
        _, shown, lang = await _open(request, token)
    except _Refused as refused:
        return refused.response
    service = service_of(request)
    nonce = service.preference_links.form_nonce(token)
    return pages.form_page(lang, shown, await _channels(service), nonce)


@router.post("/p/{token}", response_class=HTMLResponse, responses=_PAGES)
async def save_preferences(request: Request, token: str) -> HTMLResponse:
    """Save the form: every switch shown unlocked is set as posted (unticked: off)."""
    try:
        user_id, shown, lang = await _open(request, token)
    except _Refused as refused:
        return refused.response
    service = service_of(request)
    links = service.preference_links
    channels = await _channels(service)
    try:
        found = form.fields(await request.body())
        if not links.form_ok(token, next(iter(found.get("csrf", [])), None)):
            return pages.message_page(lang, "forbidden", 403, again=f"/p/{token}")
        rows = pages.rows(shown, channels)
        switches = [(c, cell.channel) for c, cells in rows for cell in cells if not cell.locked]
        chosen, profile = form.read(found, switches)
    except form.FormError as error:
        nonce = links.form_nonce(token)
        return pages.form_page(lang, shown, channels, nonce, error=str(error), status_code=400)
    await preferences.choose(service, user_id, chosen, profile)
    saved = await preferences.shown(service, user_id)
    if saved is None:  # erased meanwhile
        return pages.message_page(lang, "missing", 404)
    lang = texts.language(saved.locale, request.headers.get("accept-language"))
    return pages.form_page(lang, saved, channels, links.form_nonce(token), notice="saved")
