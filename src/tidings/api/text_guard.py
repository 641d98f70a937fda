"""One check for text no database stores: NUL (PostgreSQL refuses it in text and jsonb) and
lone UTF-16 surrogates (not encodable as UTF-8), anywhere in a path, query, header or JSON
body. Refused with a 4xx naming where, before any route or transaction sees the request.

JSON can carry either only as a ``\\u`` escape, so a body without ``\\u0000`` or a
``\\uD800``-``\\uDFFF`` escape is passed on without being parsed a second time.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import unquote_to_bytes

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tidings.api.errors import error_response

_SUSPECT_ESCAPE = re.compile(rb"\\u(?:0000|[dD][89a-fA-F][0-9a-fA-F]{2})")
_BAD_TEXT = re.compile("[\x00\ud800-\udfff]")


def bad_text_path(document: Any) -> str | None:
    """The dotted path (as on the wire) of the first string or key holding NUL or a lone
    surrogate; "" for the document itself; None when there is none."""
    stack: list[tuple[str, Any]] = [("", document)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, str) and _BAD_TEXT.search(node):
            return path
        if isinstance(node, dict | list):
            items = node.items() if isinstance(node, dict) else enumerate(node)
            for key, child in items:
                child_path = f"{path}.{key}" if path else str(key)
                if isinstance(key, str) and _BAD_TEXT.search(key):
                    return path or ""
                stack.append((child_path, child))
    return None


def _header_problem(scope: Scope) -> str | None:
    for name, value in scope.get("headers", ()):
        if b"\x00" in value:
            return str(name.decode("latin-1"))
    return None


def may_hold_bad_text(body: bytes) -> bool:
    return _SUSPECT_ESCAPE.search(body) is not None


class TextGuard:
    """``item_paths``: routes that check their body themselves, item by item (a batch answers
    one bad item with that item's error, not the whole batch's)."""

    def __init__(self, app: ASGIApp, item_paths: frozenset[str] = frozenset()) -> None:
        self.app = app
        self.item_paths = item_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        problem = self._outside_body(scope)
        if problem is not None:
            await error_response(400, "invalid_text", problem[1], problem[0])(scope, receive, send)
            return
        if scope["path"] in self.item_paths:
            await self.app(scope, receive, send)
            return
        body, more = await _read_body(receive)
        field = _body_problem(body)
        if field is not None:
            message = f"{field or 'the body'} contains NUL or a lone UTF-16 surrogate"
            await error_response(422, "invalid_text", message, field or None)(scope, receive, send)
            return
        await self.app(scope, _replay(body, more, receive), send)

    @staticmethod
    def _outside_body(scope: Scope) -> tuple[str, str] | None:
        if "\x00" in scope["path"]:
            return "path", "the path contains a NUL character"
        if b"\x00" in unquote_to_bytes(scope.get("query_string", b"")):
            return "query", "the query string contains a NUL character"
        header = _header_problem(scope)
        if header is not None:
            return header, f"header {header} contains a NUL character"
        return None


async def _read_body(receive: Receive) -> tuple[bytes, bool]:
    """The whole body (BodySizeLimit, outside this, bounds it), and whether the client
    still has messages after it (a disconnect)."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks), False
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks), True


def _body_problem(body: bytes) -> str | None:
    if not may_hold_bad_text(body):
        return None
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):
        return None  # not JSON: the route answers that
    return bad_text_path(document)


def _replay(body: bytes, more: bool, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        if more:
            return await receive()
        return {"type": "http.disconnect"}

    return replay
