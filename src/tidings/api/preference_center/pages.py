"""Rendering the preference center's pages: Jinja2 templates (escaped), in the page's
language, answered with headers that keep them out of frames, caches, search engines and
other sites' Referer (the link is the user's key to the page)."""

from __future__ import annotations

import secrets
import zoneinfo
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

import jinja2
from fastapi.responses import HTMLResponse

from tidings.api.preference_center.texts import NAMES, TEXTS
from tidings.services.preferences import Shown

_templates = jinja2.Environment(
    loader=jinja2.PackageLoader("tidings.api.preference_center", "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
)


@dataclass(frozen=True)
class Cell:
    channel: str
    on: bool
    locked: bool


@cache
def time_zones() -> tuple[str, ...]:
    """The IANA zones a user may pick (those of a region, and UTC), sorted."""
    zones = zoneinfo.available_timezones()
    return (*sorted(z for z in zones if "/" in z and not z.startswith("Etc/")), "UTC")


def rows(shown: Shown, channels: list[str]) -> list[tuple[str, list[Cell]]]:
    """Each category with a switch per channel shown; a required one is locked on."""
    return [
        (
            category,
            [Cell(c, values.get(c, True), c in shown.required.get(category, ())) for c in channels],
        )
        for category, values in shown.categories.items()
    ]


def form_page(
    lang: str,
    shown: Shown,
    channels: list[str],
    form_nonce: str,
    notice: str | None = None,
    error: str | None = None,
    status_code: int = 200,
) -> HTMLResponse:
    locales = dict(NAMES)
    if shown.locale and shown.locale not in locales:
        locales[shown.locale] = shown.locale  # keep what the API set, whatever it is
    zones = time_zones()
    if shown.timezone and shown.timezone not in zones:
        zones = (shown.timezone, *zones)
    return _render(
        "page.html",
        lang,
        status_code,
        shown=shown,
        rows=rows(shown, channels),
        channels=channels,
        form_nonce=form_nonce,
        notice=notice,
        error=error,
        zones=zones,
        locales=locales,
    )


def message_page(lang: str, key: str, status_code: int, again: str | None = None) -> HTMLResponse:
    """A page of one message (``key``.title and ``key``.text), e.g. a link not valid."""
    return _render("message.html", lang, status_code, key=key, again=again)


def _render(template: str, lang: str, status_code: int, **context: Any) -> HTMLResponse:
    nonce = secrets.token_urlsafe(16)
    t: Mapping[str, str] = TEXTS[lang]
    html = _templates.get_template(template).render(nonce=nonce, lang=lang, t=t, **context)
    return HTMLResponse(html, status_code=status_code, headers=_headers(nonce))


def _headers(nonce: str) -> dict[str, str]:
    policy = (
        f"default-src 'none'; style-src 'nonce-{nonce}'; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    )
    return {
        "Content-Security-Policy": policy,
        "X-Frame-Options": "DENY",
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-store",
        "X-Robots-Tag": "noindex",
    }
