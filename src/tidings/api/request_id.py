"""Every HTTP request has an id: the caller's ``X-Request-Id`` when it is a sane one, else a
new one. It is echoed in the answer, kept in ``request.state.request_id`` (the intake stores
it on the notification, so the dispatcher's lines carry it too) and bound to every log
record of the request (docs/operations.md, Logs).

A pure ASGI middleware: Starlette's BaseHTTPMiddleware costs a task and a stream per request.
"""

from __future__ import annotations

import re
import uuid

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tidings import logs

HEADER = b"x-request-id"
# Bounded, and nothing a log line or a header could be confused by.
_VALID = re.compile(rb"[A-Za-z0-9._-]{1,64}")


def request_id(scope: Scope) -> str:
    """The caller's id when valid, else a new one."""
    for name, value in scope.get("headers", ()):
        if name == HEADER:
            if _VALID.fullmatch(value):
                return str(value.decode("ascii"))
            break
    return uuid.uuid4().hex


class RequestId:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        found = request_id(scope)
        scope.setdefault("state", {})["request_id"] = found
        header = (HEADER, found.encode("ascii"))

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()), header]
            await send(message)

        token = logs.bind(request_id=found)
        await self.app(scope, receive, send_with_id)
        # Not in a finally: the server logs an error escaping the app after this returns, and
        # the id stays bound for that line (uvicorn runs each request in a task of its own).
        logs.unbind(token)
