"""What the chat adapters (Slack, Discord, Teams, Telegram) share: the delivery header, the
words of a message (title, body, the way out of marketing) and one JSON POST with what no
answer means."""

from __future__ import annotations

import json
from typing import Any

import httpx

from tidings.providers._http import no_answer
from tidings.providers.base import Message, PoisonError, TransientError

# Every chat request names its delivery in this header (the services ignore headers they do
# not know): the simulator knows a repeat by it, a proxy can log it. None of these services
# has an idempotency key, so a repeat is a second message (hence on_ambiguous = "fail").
DELIVERY_HEADER = "X-Tidings-Delivery"
# A configuration error (a revoked token, a missing scope) is ours, not the message's:
# retried late, as elsewhere (docs/providers.md, configuration errors).
CONFIG_RETRY_SECONDS = 300.0
# When a 429 says no wait, a second.
DEFAULT_THROTTLE_SECONDS = 1.0


def title(message: Message) -> str | None:
    subject = (message.content.subject or "").strip()
    return subject or None


def body(message: Message) -> str:
    """The text, with the unsubscribe link of a marketing message as its last line."""
    text = message.content.text.strip()
    if message.unsubscribe_url:
        text = f"{text}\n\nUnsubscribe: {message.unsubscribe_url}".strip()
    if not text and not title(message):
        raise PoisonError(f"empty {message.channel.value} message")
    return text


def chunks(text: str, size: int) -> list[str]:
    """``text`` in pieces of at most ``size`` characters, cut at a line break if one is near."""
    pieces: list[str] = []
    while len(text) > size:
        cut = text.rfind("\n", size // 2, size)
        cut = cut if cut > 0 else size
        pieces.append(text[:cut])
        text = text[cut:].lstrip("\n")
    if text:
        pieces.append(text)
    return pieces


def clipped(text: str, size: int) -> str:
    return text if len(text) <= size else text[: size - 1] + "…"


async def post_json(
    client: httpx.AsyncClient,
    provider: str,
    url: str,
    payload: dict[str, Any],
    message: Message,
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    """One POST of ``payload``; a TransientError (ambiguous once the request left) when no
    answer came."""
    content = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()
    sent = {
        "content-type": "application/json; charset=utf-8",
        DELIVERY_HEADER: message.idempotency_key,
        **(headers or {}),
    }
    try:
        return await client.post(url, content=content, headers=sent)
    except httpx.InvalidURL as error:
        raise PoisonError(f"{provider}: cannot post to this address: {error}") from error
    except httpx.TransportError as error:
        raise no_answer(provider, error) from error


def config_error(described: str, reason: str) -> TransientError:
    return TransientError(described, retry_after=CONFIG_RETRY_SECONDS, reason=reason)
