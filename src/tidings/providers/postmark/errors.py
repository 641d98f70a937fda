"""Postmark's error table: an answer other than 200 as a typed provider error, by Postmark's
``ErrorCode`` (developer docs, API overview, "API error codes") and then HTTP status."""

from __future__ import annotations

from typing import Any, Literal

import httpx

from tidings.providers._retry_after import parse_retry_after
from tidings.providers.base import (
    PermanentError,
    PoisonError,
    ProviderError,
    TransientError,
)
from tidings.states import Effect

# Seconds before retrying after a configuration error (token, sender signature, account).
CONFIG_RETRY_AFTER = 300.0


_Kind = Literal["permanent", "transient", "config"]


# Postmark's API error codes (developer docs, API overview, "API error codes") that a send can
# get, as (what it is for us, reason). Unlisted codes are permanent.
ERROR_CODES: dict[int, tuple[_Kind, str]] = {
    10: ("config", "bad_api_token"),
    100: ("transient", "maintenance"),
    300: ("permanent", "invalid_email_request"),
    400: ("config", "sender_signature_not_found"),
    401: ("config", "sender_signature_not_confirmed"),
    402: ("permanent", "invalid_json"),
    403: ("permanent", "incompatible_json"),
    405: ("config", "not_allowed_to_send"),
    409: ("permanent", "json_required"),
    410: ("permanent", "too_many_batch_messages"),
    411: ("permanent", "forbidden_attachment_type"),
    412: ("config", "account_pending"),
    413: ("config", "account_may_not_send"),
    # Listed as "Sender signature query exception": Postmark's side failing, not ours.
    500: ("transient", "postmark_internal"),
}


INACTIVE_RECIPIENT = 406


RATE_LIMITED = 429


def classify(response: httpx.Response, now: float) -> ProviderError:
    """The error for an answer other than 200: by HTTP status for the token, size, rate and
    Postmark's own failures, else by Postmark's ``ErrorCode``."""
    status = response.status_code
    code, text = _error_body(response)
    detail = f"Postmark {status} ErrorCode {code}: {text}"
    if status == 401 or code == 10:
        return TransientError(detail, retry_after=CONFIG_RETRY_AFTER, reason="bad_api_token")
    if status == 413:
        return PoisonError(detail, reason="payload_too_large")
    if status == RATE_LIMITED or code == RATE_LIMITED:
        retry_after = parse_retry_after(response.headers.get("Retry-After"), now)
        return TransientError(detail, retry_after=retry_after, reason="rate_limited")
    if status >= 500:
        retry_after = parse_retry_after(response.headers.get("Retry-After"), now)
        return TransientError(detail, retry_after=retry_after, reason=f"http_{status}")
    if code == INACTIVE_RECIPIENT:
        # Postmark will not mail this address again (a hard bounce, a spam complaint or a
        # manual suppression there): neither will tidings.
        return PermanentError(detail, effect=Effect.SUPPRESS_ADDRESS, reason="inactive_recipient")
    return _by_code(code, status, detail)


def _by_code(code: int | None, status: int, detail: str) -> ProviderError:
    if code is None:
        return PermanentError(detail, reason=f"http_{status}")
    kind, reason = ERROR_CODES.get(code, ("permanent", f"postmark_{code}"))
    if kind == "config":
        return TransientError(detail, retry_after=CONFIG_RETRY_AFTER, reason=reason)
    if kind == "transient":
        return TransientError(detail, reason=reason)
    return PermanentError(detail, reason=reason)


def _error_body(response: httpx.Response) -> tuple[int | None, str]:
    try:
        body: Any = response.json()
    except ValueError:
        return None, response.text[:200]
    if not isinstance(body, dict):
        return None, str(body)[:200]
    code = body.get("ErrorCode")
    code = code if isinstance(code, int) and not isinstance(code, bool) else None
    return code, str(body.get("Message", ""))[:200]
