"""Rendering the dashboard's pages: Jinja2 templates (escaped), answered with headers that
keep them out of frames and caches and let only their own inline style and script run."""

from __future__ import annotations

import secrets
from datetime import datetime
from typing import Any

import jinja2
from fastapi.responses import HTMLResponse

_templates = jinja2.Environment(
    loader=jinja2.PackageLoader("tidings.api.dashboard", "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
)


def _ago(at: datetime | None, now: datetime) -> str:
    if at is None:
        return "—"
    seconds = max(0, int((now - at).total_seconds()))
    if seconds < 120:
        return f"{seconds} s ago"
    if seconds < 7200:
        return f"{seconds // 60} min ago"
    if seconds < 172800:
        return f"{seconds // 3600} h ago"
    return at.strftime("%Y-%m-%d %H:%M UTC")


_templates.filters["ago"] = _ago


def page(template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    nonce = secrets.token_urlsafe(16)
    html = _templates.get_template(template).render(nonce=nonce, **context)
    return HTMLResponse(html, status_code=status_code, headers=_headers(nonce))


def _headers(nonce: str) -> dict[str, str]:
    policy = (
        f"default-src 'none'; style-src 'nonce-{nonce}'; script-src 'nonce-{nonce}'; "
        "img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    )
    return {
        "Content-Security-Policy": policy,
        "X-Frame-Options": "DENY",
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "same-origin",
        "Cache-Control": "no-store",
    }
