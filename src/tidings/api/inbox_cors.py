"""CORS for the inbox feed's routes only (docs/inbox.md): pages of the origins in
``inbox.allowed_origins`` may call them from a browser with a user token; no other route
answers a browser of another origin (server keys never belong in a page)."""

from __future__ import annotations

import re

from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send

# /v1/users/{id}/inbox and below; not /v1/users/{id}/inbox-token (a server key's route).
FEED_PATH = re.compile(r"^/v1/users/[^/]+/inbox(/|$)")


class InboxCors:
    def __init__(self, app: ASGIApp, origins: list[str]) -> None:
        self.app = app
        self.cors = CORSMiddleware(
            app,
            allow_origins=origins,
            allow_methods=["GET", "POST"],
            allow_headers=["Authorization", "Last-Event-ID"],
            max_age=600,
        )
        self.enabled = bool(origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.enabled and scope["type"] == "http" and FEED_PATH.match(scope["path"]):
            await self.cors(scope, receive, send)
        else:
            await self.app(scope, receive, send)
