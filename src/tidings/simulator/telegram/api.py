"""Simulated Telegram Bot API: ``POST /bot{token}/sendMessage``.

A wrong token is 401 ``Unauthorized``. The message is checked as the Bot API does: a
``chat_id``, a non-empty ``text`` of at most 4,096 characters once its entities are
parsed, and the entities themselves: in HTML only the tags Telegram knows, ``&`` only as an
entity; in MarkdownV2 every reserved character outside an entity escaped. A parse failure
is 400 ``Bad Request: can't parse entities: …``. Answers are ``{"ok": true, "result":
<Message>}`` or ``{"ok": false, "error_code", "description", "parameters"}``; over its
rate, 429 with ``parameters.retry_after``. Errors are scripted by chat id, by the names of
``ERRORS`` (``blocked``: "Forbidden: bot was blocked by the user"; ``migrated``: the group
became a supergroup, ``migrate_to_chat_id`` = -100 followed by its digits). Like Telegram,
it has no idempotency key; it knows a repeat by tidings' ``X-Tidings-Delivery`` header.
"""

from __future__ import annotations

import hmac
import html
import json
import re
import time
from html.parser import HTMLParser
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from tidings.simulator.behaviour import OK, OUTAGE, RATE_LIMITED, ErrorNames, ProviderState
from tidings.simulator.server import HTTP_PROVIDERS, KNOWN_ERRORS, Simulator

NAME = "telegram"
DELIVERY_HEADER = "x-tidings-delivery"
RETRY_AFTER = 1
CHAT_ID = re.compile(r"-?[1-9][0-9]{0,19}|@[A-Za-z][A-Za-z0-9_]{4,31}")
HTML_TAGS = frozenset(
    {"b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "span", "tg-spoiler", "a",
     "code", "pre", "blockquote", "tg-emoji"}
)  # fmt: skip
MARKDOWN_RESERVED = set("_*[]()~`>#+-=|{}.!")
MARKUP = set("*_~|`")

# Scripted answers: name -> (HTTP status and error_code, description).
ERRORS: dict[str, tuple[int, str]] = {
    "blocked": (403, "Forbidden: bot was blocked by the user"),
    "user_deactivated": (403, "Forbidden: user is deactivated"),
    "kicked": (403, "Forbidden: bot was kicked from the group chat"),
    "cannot_initiate": (403, "Forbidden: bot can't initiate conversation with a user"),
    "chat_not_found": (400, "Bad Request: chat not found"),
    "migrated": (400, "Bad Request: group chat was upgraded to a supergroup chat"),
    "internal": (500, "Internal Server Error"),
    "bad_gateway": (502, "Bad Gateway"),
}


class SimulatedTelegram:
    def __init__(self, sim: Simulator) -> None:
        self.state: ProviderState = sim.new_state(NAME)
        self.state.error_names = ERROR_NAMES
        self.token = sim.config.telegram_bot_token
        self.message_ids: dict[str, int] = {}

    def routes(self) -> list[BaseRoute]:
        return [Route("/bot{token}/sendMessage", self.send_message, methods=["POST"])]

    async def send_message(self, request: Request) -> Response:
        if not hmac.compare_digest(request.path_params["token"].encode(), self.token.encode()):
            return failure(401, "Unauthorized")
        try:
            payload = json.loads(await request.body())
        except ValueError:
            return failure(400, "Bad Request: invalid JSON")
        if not isinstance(payload, dict):
            return failure(400, "Bad Request: invalid JSON")
        chat = str(payload.get("chat_id", ""))
        if not CHAT_ID.fullmatch(chat):
            return failure(400, "Bad Request: chat not found")
        problem = text_problem(payload.get("text"), payload.get("parse_mode"))
        if problem is not None:
            return failure(400, problem)
        admission = await self.state.admit(chat)
        if admission == OUTAGE:
            return failure(502, "Bad Gateway")
        if admission == RATE_LIMITED:
            description = f"Too Many Requests: retry after {RETRY_AFTER}"
            return failure(429, description, {"retry_after": RETRY_AFTER})
        if admission != OK:
            return self._scripted(admission, chat)
        self.state.record(chat, request.headers.get(DELIVERY_HEADER), payload)
        self.message_ids[chat] = self.message_ids.get(chat, 0) + 1
        result = {
            "message_id": self.message_ids[chat],
            "chat": {"id": int(chat) if chat[0] != "@" else -1001000000001, "type": "private"},
            "date": int(time.time()),
            "text": payload["text"],
        }
        return JSONResponse({"ok": True, "result": result})

    def _scripted(self, name: str, chat: str) -> Response:
        status, description = ERRORS.get(name, (400, f"Bad Request: {name}"))
        if name == "migrated":
            moved = int("-100" + chat.lstrip("-@")) if chat.lstrip("-").isdigit() else -1001
            return failure(status, description, {"migrate_to_chat_id": moved})
        return failure(status, description)


def failure(status: int, description: str, parameters: dict[str, Any] | None = None) -> Response:
    body: dict[str, Any] = {"ok": False, "error_code": status, "description": description}
    if parameters:
        body["parameters"] = parameters
    return JSONResponse(body, status_code=status)


def text_problem(text: Any, parse_mode: Any) -> str | None:
    """The Bot API's description of a text it refuses, or None."""
    if not isinstance(text, str) or not text.strip():
        return "Bad Request: message text is empty"
    if parse_mode not in (None, "HTML", "MarkdownV2", "Markdown"):
        return f"Bad Request: unsupported parse_mode {parse_mode}"
    try:
        visible = _parsed(text, parse_mode)
    except ValueError as error:
        return f"Bad Request: can't parse entities: {error}"
    if len(visible) > 4096:
        return "Bad Request: message is too long"
    return None


def _parsed(text: str, parse_mode: str | None) -> str:
    if parse_mode == "HTML":
        return _Html.parse(text)
    if parse_mode == "MarkdownV2":
        return _markdown(text)
    return text


class _Html(HTMLParser):
    """Telegram's HTML: its tags only, entities for <, > and &, tags closed in order."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=False)
        self.open: list[str] = []
        self.text: list[str] = []

    @classmethod
    def parse(cls, text: str) -> str:
        if re.search(r"&(?![a-zA-Z]+;|#[0-9]+;|#x[0-9a-fA-F]+;)", text):
            raise ValueError("Character '&' is reserved and must be escaped as &amp;")
        parser = cls()
        parser.feed(text)
        parser.close()
        if parser.open:
            raise ValueError(f'Can\'t find end tag corresponding to start tag "{parser.open[-1]}"')
        return "".join(parser.text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in HTML_TAGS:
            raise ValueError(f'Unsupported start tag "{tag}"')
        self.open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.open or self.open[-1] != tag:
            raise ValueError(f'Unmatched end tag "{tag}"')
        self.open.pop()

    def handle_data(self, data: str) -> None:
        if "<" in data or ">" in data:
            raise ValueError("Character '<' or '>' must be escaped")
        self.text.append(data)

    def handle_entityref(self, name: str) -> None:
        self.text.append(html.unescape(f"&{name};"))

    def handle_charref(self, name: str) -> None:
        self.text.append(html.unescape(f"&#{name};"))


def _markdown(text: str) -> str:
    """MarkdownV2: a backslash escapes any character; the markup characters open and close
    entities in pairs; every other reserved character must be escaped."""
    visible: list[str] = []
    opened: list[str] = []
    escaped = False
    for index, char in enumerate(text):
        if escaped:
            visible.append(char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char in MARKUP:
            if opened and opened[-1] == char:
                opened.pop()
            else:
                opened.append(char)
        elif char in MARKDOWN_RESERVED:
            raise ValueError(
                f"Character '{char}' is reserved and must be escaped with the preceding '\\'"
                f" (byte offset {len(text[:index].encode())})"
            )
        else:
            visible.append(char)
    if opened:
        raise ValueError(f"Can't find end of the entity starting with '{opened[-1]}'")
    return "".join(visible)


ERROR_NAMES = ErrorNames(frozenset(ERRORS), None, None)
KNOWN_ERRORS[NAME] = ERROR_NAMES
HTTP_PROVIDERS[NAME] = SimulatedTelegram
