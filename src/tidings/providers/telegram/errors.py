"""Telegram's error table: the Bot API answers ``{"ok": false, "error_code",
"description", "parameters"}``; what an error means is in its description (the API's codes
are HTTP statuses). Sources: core.telegram.org/bots/api (Making requests,
ResponseParameters: retry_after, migrate_to_chat_id), core.telegram.org/bots/faq (broadcast
limits: about 30 messages a second, one a second per chat, 20 a minute per group), and the
Bot API's descriptions as it answers them ("Forbidden: bot was blocked by the user")."""

from __future__ import annotations

from typing import Any

from tidings.providers._chat import DEFAULT_THROTTLE_SECONDS, config_error
from tidings.providers.base import (
    PermanentError,
    PoisonError,
    ProviderError,
    TransientError,
)
from tidings.states import Effect

# 403s after which the chat is gone for this bot: the address is deactivated (suppressed,
# as a dead push token is), until the user starts the bot again and the suppression is lifted.
GONE = {
    "bot was blocked by the user": "bot_blocked",
    "user is deactivated": "user_deactivated",
    "bot was kicked": "bot_kicked",
    "the group chat was deleted": "chat_deleted",
}
# 400s about the message itself.
POISON = {
    "can't parse entities": "cant_parse_entities",
    "message is too long": "message_too_long",
    "message text is empty": "message_empty",
    "text must be non-empty": "message_empty",
}


def classify(status: int, answer: dict[str, Any]) -> ProviderError:
    given = answer.get("error_code")
    code: int = given if isinstance(given, int) else status
    description = str(answer.get("description") or "")[:300]
    described = f"telegram {code}: {description}"
    lowered = description.lower()
    found = answer.get("parameters")
    parameters: dict[str, Any] = found if isinstance(found, dict) else {}
    if code == 429:
        wait = parameters.get("retry_after")
        retry = float(wait) if isinstance(wait, int | float) and wait >= 0 else None
        return TransientError(
            described, retry_after=retry or DEFAULT_THROTTLE_SECONDS, reason="rate_limited"
        )
    if code in (401, 404):
        # The token is wrong or revoked (a wrong token's path is 404 Not Found).
        return config_error(described, "unauthorized")
    if code == 403:
        gone = next((r for text, r in GONE.items() if text in lowered), None)
        if gone is not None:
            return PermanentError(described, effect=Effect.SUPPRESS_ADDRESS, reason=gone)
        # "bot can't initiate conversation with a user": the user never started the bot.
        return PermanentError(described, reason="forbidden")
    if code == 400:
        poison = next((r for text, r in POISON.items() if text in lowered), None)
        if poison is not None:
            return PoisonError(described, reason=poison)
        if "chat not found" in lowered:
            return PermanentError(described, reason="chat_not_found")
        return PermanentError(described, reason="bad_request")
    if code >= 500 or status >= 500:
        return TransientError(described, reason=f"http_{code}")
    return PermanentError(described, reason=f"telegram_{code}")


def migrated_to(answer: dict[str, Any]) -> str | None:
    """The supergroup a group became (``parameters.migrate_to_chat_id``), if it did."""
    parameters = answer.get("parameters")
    if not isinstance(parameters, dict):
        return None
    moved = parameters.get("migrate_to_chat_id")
    return str(moved) if isinstance(moved, int) else None
