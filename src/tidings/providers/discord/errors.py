"""Discord's error table: an answer other than 200 as a typed provider error, by its JSON
error code (``{"code", "message"}``) first, then by HTTP status. A 429's body says how
long to wait (``retry_after``, seconds as a float) and whether the limit hit was the
global one (``global``, or ``X-RateLimit-Scope: global``). Sources:
discord.com/developers/docs/topics/rate-limits, .../topics/opcodes-and-status-codes (JSON
error codes), .../resources/webhook (Execute Webhook)."""

from __future__ import annotations

import math
from typing import Any

import httpx

from tidings.providers._chat import DEFAULT_THROTTLE_SECONDS
from tidings.providers._retry_after import parse_retry_after
from tidings.providers.base import (
    PermanentError,
    PoisonError,
    ProviderError,
    TransientError,
)
from tidings.states import Effect

# The webhook is gone or its token is wrong: the URL will never work again.
DEAD_WEBHOOK = {10015: "unknown_webhook", 50027: "invalid_webhook_token"}
# The message itself can never be posted.
POISON = {50006: "empty_message", 50035: "invalid_form_body", 40005: "too_large"}
# The webhook's channel refuses it (permissions, a thread archived): fixable in Discord.
REFUSED = {50013: "missing_permissions", 50001: "missing_access", 50083: "thread_archived"}


def classify(response: httpx.Response) -> ProviderError:
    status = response.status_code
    body = _body(response)
    code = body.get("code") if isinstance(body.get("code"), int) else None
    described = f"discord {status} {code or ''}: {str(body.get('message', ''))[:200]}"
    if status == 429:
        return _throttled(described, response, body)
    if code in DEAD_WEBHOOK or status == 404:
        reason = DEAD_WEBHOOK.get(code or 0, "unknown_webhook")
        return PermanentError(described, effect=Effect.SUPPRESS_ADDRESS, reason=reason)
    if code in POISON or status == 413:
        return PoisonError(described, reason=POISON.get(code or 0, "too_large"))
    if code in REFUSED:
        return PermanentError(described, reason=REFUSED[code or 0])
    if status >= 500:
        retry = parse_retry_after(response.headers.get("retry-after"))
        return TransientError(described, retry_after=retry, reason=f"http_{status}")
    return PermanentError(described, reason=f"discord_{code}" if code else f"http_{status}")


def _throttled(described: str, response: httpx.Response, body: dict[str, Any]) -> TransientError:
    """The global limit pauses the whole account; a webhook's own limit only its delivery."""
    wait = body.get("retry_after")
    seconds = float(wait) if isinstance(wait, int | float) and math.isfinite(wait) else None
    if seconds is None or seconds < 0:
        seconds = parse_retry_after(response.headers.get("retry-after"))
    scope = response.headers.get("x-ratelimit-scope", "")
    is_global = body.get("global") is True or scope == "global"
    return TransientError(
        f"{described} ({'global' if is_global else 'webhook'} limit)",
        retry_after=seconds or DEFAULT_THROTTLE_SECONDS,
        reason="rate_limited" if is_global else "rate_limited_route",
    )


def _body(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {"message": response.text[:200]}
    return body if isinstance(body, dict) else {}
