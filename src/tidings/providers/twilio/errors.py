"""Twilio's error table: a non-2xx answer of the Messages API as a typed provider error,
by Twilio error code first (``{"code", "message", "more_info", "status"}``), then by HTTP
status."""

from __future__ import annotations

from typing import Any

import httpx

from tidings.providers._retry_after import parse_retry_after
from tidings.providers.base import (
    PermanentError,
    ProviderError,
    TransientError,
)
from tidings.states import Effect

# A bad account SID or token is our configuration, not the message: retry late (an operator
# rotating the token should not dead-letter the whole queue), bounded by the retry policy.
AUTH_RETRY_SECONDS = 300.0


# Twilio's 429 carries no Retry-After; its guidance is to back off, so we suggest a second.
DEFAULT_THROTTLE_SECONDS = 1.0


# Documented request-time error codes with a side effect on the address.
SUPPRESS_CODES = {
    21211: "invalid_number",
    21610: "unsubscribed_stop",
    21614: "not_mobile",  # a landline: no SMS will ever reach it
}


# Request errors that are about our account/configuration, never about the recipient: a
# wrong From number or a region not enabled would otherwise dead-letter every SMS. Transient
# with a long wait (docs/providers.md: configuration errors), bounded by the retry policy.
CONFIG_CODES = {21408: "region_not_enabled", 21606: "from_not_capable", 21659: "from_invalid"}


CONFIG_RETRY_SECONDS = 300.0


def classify(response: httpx.Response) -> ProviderError:
    """The error for a non-2xx answer, by Twilio error code first, then by HTTP status."""
    status = response.status_code
    code, text = _error_body(response)
    described = f"twilio {status} {code}: {text}"
    if code in SUPPRESS_CODES:
        return PermanentError(
            described, effect=Effect.SUPPRESS_ADDRESS, reason=SUPPRESS_CODES[code]
        )
    if code in CONFIG_CODES or status == 403:
        reason = CONFIG_CODES.get(code or 0, "forbidden")
        return TransientError(described, retry_after=CONFIG_RETRY_SECONDS, reason=reason)
    if status == 429 or code == 20429:
        retry = parse_retry_after(response.headers.get("retry-after"))
        return TransientError(
            described, retry_after=retry or DEFAULT_THROTTLE_SECONDS, reason="rate_limited"
        )
    if status == 401 or code == 20003:
        return TransientError(described, retry_after=AUTH_RETRY_SECONDS, reason="auth_failed")
    if status >= 500:
        retry = parse_retry_after(response.headers.get("retry-after"))
        return TransientError(described, retry_after=retry)
    return PermanentError(described, reason=f"twilio_{code}" if code else None)


def _error_body(response: httpx.Response) -> tuple[int | None, str]:
    try:
        body: Any = response.json()
    except ValueError:
        return None, response.text[:200]
    if not isinstance(body, dict):
        return None, str(body)[:200]
    code = body.get("code")
    return (code if isinstance(code, int) else None), str(body.get("message", ""))[:200]
