"""Resend's error table: an answer other than 200 as a typed provider error, by the body's
``name`` (Resend's API reference, "Errors") and then the HTTP status. Bodies are
``{"statusCode", "name", "message"}``."""

from __future__ import annotations

from typing import Any, Literal

import httpx

from tidings.providers._retry_after import parse_retry_after
from tidings.providers.base import PermanentError, PoisonError, ProviderError, TransientError

# Seconds before retrying after a configuration error (key, sender domain, endpoint).
CONFIG_RETRY_AFTER = 300.0
# A daily quota without a Retry-After: try again in an hour rather than hammer it.
QUOTA_RETRY_AFTER = 3600.0
# Another request with this key is still being processed: its answer is near.
IN_PROGRESS_RETRY_AFTER = 1.0

_Kind = Literal["permanent", "transient", "config", "poison"]

# Resend's error names a send can get, as (what it is for us, reason). By status otherwise.
ERROR_NAMES: dict[str, tuple[_Kind, str]] = {
    "missing_api_key": ("config", "missing_api_key"),
    "restricted_api_key": ("config", "restricted_api_key"),
    "invalid_api_key": ("config", "invalid_api_key"),
    "invalid_from_address": ("config", "invalid_from_address"),
    "invalid_access": ("config", "invalid_access"),
    "not_found": ("config", "not_found"),  # the base_url is wrong
    "monthly_quota_exceeded": ("config", "monthly_quota_exceeded"),
    # Our key is a delivery id (36 characters): refused, it is refused on every retry.
    "invalid_idempotency_key": ("poison", "invalid_idempotency_key"),
    "validation_error": ("permanent", "validation_error"),
    "missing_required_field": ("permanent", "missing_required_field"),
    "invalid_parameter": ("permanent", "invalid_parameter"),
    "invalid_attachment": ("permanent", "invalid_attachment"),
    "method_not_allowed": ("permanent", "method_not_allowed"),
    "security_error": ("permanent", "security_error"),
    "application_error": ("transient", "application_error"),
    "internal_server_error": ("transient", "internal_server_error"),
}


def classify(response: httpx.Response, now: float) -> ProviderError:
    """The error for an answer other than 200."""
    status = response.status_code
    name, text = _error_body(response)
    detail = f"Resend {status} {name}: {text}"
    retry_after = parse_retry_after(response.headers.get("Retry-After"), now)
    if name == "concurrent_idempotent_requests":
        wait = retry_after or IN_PROGRESS_RETRY_AFTER
        return TransientError(detail, retry_after=wait, reason="idempotency_in_progress")
    if name == "invalid_idempotent_request":
        # This delivery's key was used within 24 hours with another body: an earlier
        # attempt reached Resend (and was most likely sent). Never sent again.
        return PermanentError(detail, reason="idempotency_conflict")
    if status == 429 or name in ("rate_limit_exceeded", "daily_quota_exceeded"):
        if name == "daily_quota_exceeded":
            retry_after = retry_after or QUOTA_RETRY_AFTER
        return TransientError(detail, retry_after=retry_after, reason=name or "rate_limited")
    if status >= 500:
        return TransientError(detail, retry_after=retry_after, reason=name or f"http_{status}")
    if status in (401, 403) and name == "validation_error":
        # A 403 validation error is the account's: an unverified domain, a test key.
        return TransientError(detail, retry_after=CONFIG_RETRY_AFTER, reason="sender_not_allowed")
    return _by_name(name, status, detail)


def _by_name(name: str | None, status: int, detail: str) -> ProviderError:
    default: tuple[_Kind, str] = (
        ("config", f"http_{status}") if status in (401, 403) else ("permanent", f"http_{status}")
    )
    kind, reason = ERROR_NAMES.get(name or "", default)
    if kind == "config":
        return TransientError(detail, retry_after=CONFIG_RETRY_AFTER, reason=reason)
    if kind == "transient":
        return TransientError(detail, reason=reason)
    if kind == "poison":
        return PoisonError(detail, reason=reason)
    if status == 413:
        return PoisonError(detail, reason="payload_too_large")
    return PermanentError(detail, reason=reason)


def _error_body(response: httpx.Response) -> tuple[str | None, str]:
    try:
        body: Any = response.json()
    except ValueError:
        return None, response.text[:200]
    if not isinstance(body, dict):
        return None, str(body)[:200]
    name = body.get("name")
    return (name if isinstance(name, str) and name else None), str(body.get("message", ""))[:200]
