"""An answer lost on the way back: the provider accepted the request and acted on it, then
the connection broke before its answer arrived (a proxy reset, a load balancer timing out).

Sent as the start of a 200 whose body never comes: the server closes the connection after
the headers, so the client reads an incomplete answer, an error it cannot tell from a reset
after sending. What a sender learns is only that the request may have been acted on.
"""

from __future__ import annotations

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

# The error name a provider that can lose its answers accepts in scripts and behaviours.
ANSWER_LOST = "answer_lost"


class _Lost(Exception):
    """Raised after the headers: the server closes the connection."""


class LostAnswer(Response):
    def __init__(self) -> None:
        super().__init__(status_code=200, media_type="application/json")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # Headers promising a body, then no body: the connection is dropped.
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", b"64")],
            }
        )
        raise _Lost("the answer was lost after the request was accepted")
