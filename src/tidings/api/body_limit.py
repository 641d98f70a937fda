"""A request body size limit, enforced while the body streams in (chunked bodies too)."""

from __future__ import annotations

import json

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodyTooLarge(HTTPException):
    """Raised from ``receive``: FastAPI re-raises HTTPExceptions met while reading a body."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"request body over {limit} bytes")


class BodySizeLimit:
    """Answer 413 to a body over ``limit`` bytes (``limits_by_path`` overrides per path,
    ``limits_by_prefix`` per path prefix)."""

    def __init__(
        self,
        app: ASGIApp,
        limit: int,
        limits_by_path: dict[str, int],
        limits_by_prefix: dict[str, int] | None = None,
    ) -> None:
        self.app = app
        self.limit = limit
        self.limits_by_path = limits_by_path
        self.limits_by_prefix = limits_by_prefix or {}

    def limit_for(self, path: str) -> int:
        if path in self.limits_by_path:
            return self.limits_by_path[path]
        prefixed = (n for prefix, n in self.limits_by_prefix.items() if path.startswith(prefix))
        return next(prefixed, self.limit)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit_for(scope["path"])
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await _too_large(send, limit)
            return
        received = 0
        started = False

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLarge(limit)
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counting_receive, tracking_send)
        except BodyTooLarge:
            if not started:
                await _too_large(send, limit)


async def _too_large(send: Send, limit: int) -> None:
    body = json.dumps(
        {
            "error": {
                "code": "body_too_large",
                "message": f"request body over {limit} bytes",
                "field": None,
            }
        }
    )
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": body.encode()})
