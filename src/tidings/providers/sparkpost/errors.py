"""SparkPost's error table: an answer other than 200 as a typed provider error, by the
extended error ``code`` of ``{"errors": [{"message", "code", "description"}]}`` (SparkPost's
"Extended Error Codes") and then the HTTP status."""

from __future__ import annotations

from typing import Any, Literal

import httpx

from tidings.providers._retry_after import parse_retry_after
from tidings.providers.base import PermanentError, PoisonError, ProviderError, TransientError
from tidings.states import Effect

# Seconds before retrying after a configuration error (key, sending domain, account).
CONFIG_RETRY_AFTER = 300.0
# An exceeded daily sending limit: an hour, rather than hammer it.
DAILY_LIMIT_RETRY_AFTER = 3600.0

_Kind = Literal["permanent", "transient", "config"]

# SparkPost's extended codes a transmission can get, as (what it is for us, reason).
ERROR_CODES: dict[str, tuple[_Kind, str]] = {
    "1100": ("config", "permission_denied"),
    "1601": ("config", "no_license"),
    "1910": ("config", "generation_not_configured"),
    "7000": ("config", "sending_domain_blocked"),
    "7001": ("config", "invalid_sending_domain"),
    "2101": ("config", "hourly_limit"),
    "2103": ("config", "sandbox_limit"),
    "2105": ("config", "monthly_limit"),
    "1900": ("transient", "generation_unavailable"),
    "1502": ("transient", "resources_unavailable"),
    "1500": ("transient", "database_error"),
    "1501": ("transient", "database_error"),
    "1200": ("permanent", "invalid_params"),
    "1300": ("permanent", "invalid_data"),
    "1301": ("permanent", "invalid_fields"),
    "1305": ("permanent", "not_utf8"),
    "1400": ("permanent", "required_field_missing"),
    "1901": ("permanent", "generation_failed"),
    "2002": ("permanent", "substitution_data_too_large"),
    "3002": ("permanent", "invalid_header"),
}
SUPPRESSED = "1902"  # "Message generation rejected": the recipient is on a suppression list
DAILY_LIMIT = "2102"


def classify(response: httpx.Response, now: float) -> ProviderError:
    status = response.status_code
    code, text = _first_error(response)
    detail = f"SparkPost {status} code {code}: {text}"
    if status == 401:
        return TransientError(detail, retry_after=CONFIG_RETRY_AFTER, reason="credentials")
    if status == 413:
        return PoisonError(detail, reason="payload_too_large")
    if status == 429:
        retry_after = parse_retry_after(response.headers.get("Retry-After"), now)
        return TransientError(detail, retry_after=retry_after, reason="rate_limited")
    if code == SUPPRESSED:
        # SparkPost will not mail this address (a bounce, complaint or unsubscribe there).
        return PermanentError(detail, effect=Effect.SUPPRESS_ADDRESS, reason="suppressed_recipient")
    if code == DAILY_LIMIT:
        return TransientError(detail, retry_after=DAILY_LIMIT_RETRY_AFTER, reason="daily_limit")
    if code in ERROR_CODES:
        return _by_code(*ERROR_CODES[code], detail)
    if status >= 500:
        retry_after = parse_retry_after(response.headers.get("Retry-After"), now)
        return TransientError(detail, retry_after=retry_after, reason=f"http_{status}")
    if status in (403, 420):  # permission, sending limits: the account's
        return TransientError(detail, retry_after=CONFIG_RETRY_AFTER, reason=f"http_{status}")
    return PermanentError(detail, reason=f"http_{status}")


def _by_code(kind: _Kind, reason: str, detail: str) -> ProviderError:
    if kind == "config":
        return TransientError(detail, retry_after=CONFIG_RETRY_AFTER, reason=reason)
    if kind == "transient":
        return TransientError(detail, reason=reason)
    return PermanentError(detail, reason=reason)


def _first_error(response: httpx.Response) -> tuple[str | None, str]:
    try:
        body: Any = response.json()
        first = body["errors"][0]
        code = first.get("code")
        text = f"{first.get('message', '')}: {first.get('description', '')}".strip(": ")
        return (str(code) if code is not None else None), text[:200]
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        return None, response.text[:200]
