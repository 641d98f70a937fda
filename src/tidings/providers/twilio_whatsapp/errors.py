"""Twilio's WhatsApp error table: an answer of the Messages API (``{"code", "message",
"more_info", "status"}``) and the ``ErrorCode`` of a failed status callback, by Twilio error
code. Sources: twilio.com/docs/api/errors/<code> (21211, 21614, 21654, 21655, 21656, 63003,
63007, 63016, 63018, 63021, 63024, 63027, 63028, 63049) and "List of corresponding Twilio
and WhatsApp error codes" (twilio.com/docs/whatsapp/api/error-code-mapping)."""

from __future__ import annotations

from typing import Any

import httpx

from tidings.providers._chat import config_error
from tidings.providers._retry_after import parse_retry_after
from tidings.providers.base import PermanentError, PoisonError, ProviderError, TransientError
from tidings.states import Effect

# The number is not (or no longer) a WhatsApp user's: nothing will reach it.
SUPPRESS = {21211: "invalid_number", 21614: "invalid_number", 63003: "invalid_number"}
SUPPRESS |= {63024: "invalid_recipient"}
# Ours to fix (the sender, the template, the credentials): retried late.
CONFIG = {
    20003: "auth_failed",
    63007: "sender_not_found",  # From is no WhatsApp sender of the account
    63027: "template_not_found",  # no such template in that language
    21655: "content_sid_invalid",
}
# The message itself can never be sent.
POISON = {
    21654: "content_sid_required",
    21656: "content_variables_invalid",
    63021: "invalid_content",
    63028: "parameter_count_mismatch",
}
# 63018: the sender's WhatsApp messaging limit or Twilio's rate for it.
RATE_SECONDS = 60.0
PERMANENT = {63016: "outside_window", 63049: "meta_held_back"}


def classify(response: httpx.Response) -> ProviderError:
    status = response.status_code
    code, text = _error(response)
    described = f"twilio whatsapp {status} {code}: {text}"
    return by_code(code, described, status, response.headers.get("retry-after"))


def by_code(
    code: int | None, described: str, status: int = 400, retry_after: str | None = None
) -> ProviderError:
    if code in SUPPRESS:
        return PermanentError(described, effect=Effect.SUPPRESS_ADDRESS, reason=SUPPRESS[code])
    if code in CONFIG or status in (401, 403):
        return config_error(described, CONFIG.get(code or 0, "forbidden"))
    if code in POISON:
        return PoisonError(described, reason=POISON[code or 0])
    if code in (63018, 20429) or status == 429:
        wait = parse_retry_after(retry_after) or (RATE_SECONDS if code == 63018 else 1.0)
        return TransientError(described, retry_after=wait, reason="rate_limited")
    if status >= 500:
        return TransientError(described, retry_after=parse_retry_after(retry_after))
    return PermanentError(described, reason=PERMANENT.get(code or 0, f"twilio_{code}"))


def _error(response: httpx.Response) -> tuple[int | None, str]:
    try:
        body: Any = response.json()
    except ValueError:
        return None, response.text[:200]
    if not isinstance(body, dict):
        return None, str(body)[:200]
    code = body.get("code")
    return (code if isinstance(code, int) else None), str(body.get("message", ""))[:200]
