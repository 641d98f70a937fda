"""Mailgun's error table: an answer other than 200 as a typed provider error, by HTTP status
(Mailgun has no error codes).

400 is permanent (a malformed address is not a bounce: nothing suppressed); 401/403 our key
or a domain not allowed to send, 404 a domain unknown to the account: configuration,
transient with a long retry; 413 poison; 429 transient after Retry-After; 5xx transient;
other 4xx permanent."""

from __future__ import annotations

import httpx

from tidings.providers._retry_after import parse_retry_after
from tidings.providers.base import (
    PermanentError,
    PoisonError,
    ProviderError,
    TransientError,
)

# Seconds before retrying after a configuration error (a key, a domain: an operator's fix).
CONFIG_RETRY_AFTER = 300.0


def classify(response: httpx.Response, now: float) -> ProviderError:
    """The error for an answer other than 200, by HTTP status (Mailgun has no error codes)."""
    status = response.status_code
    detail = f"Mailgun {status}: {_error_message(response)}"
    if status in (401, 403):
        return TransientError(detail, retry_after=CONFIG_RETRY_AFTER, reason="credentials")
    if status == 404:
        return TransientError(detail, retry_after=CONFIG_RETRY_AFTER, reason="domain_not_found")
    if status == 413:
        return PoisonError(detail, reason="payload_too_large")
    if status == 429:
        retry_after = parse_retry_after(response.headers.get("Retry-After"), now)
        return TransientError(detail, retry_after=retry_after, reason="rate_limited")
    if status >= 500:
        retry_after = parse_retry_after(response.headers.get("Retry-After"), now)
        return TransientError(detail, retry_after=retry_after, reason=f"http_{status}")
    return PermanentError(detail, reason="bad_request" if status == 400 else f"http_{status}")


def _error_message(response: httpx.Response) -> str:
    """Mailgun's ``{"message": …}``, or the text (its 401 is a plain ``Forbidden``)."""
    try:
        body = response.json()
    except ValueError:
        return response.text[:200]
    if isinstance(body, dict) and "message" in body:
        return str(body["message"])[:200]
    return str(body)[:200]
