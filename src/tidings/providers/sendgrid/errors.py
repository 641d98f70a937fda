"""SendGrid's error table: a non-2xx answer of Mail Send as a typed provider error.

400 is a request SendGrid will refuse again (permanent, nothing suppressed: a malformed
address is not a bounce); 401/403 our credentials or sender identity (transient with a long
retry, so that no delivery is lost or address suppressed while an operator fixes the key);
413 poison; 429 transient after Retry-After or X-RateLimit-Reset; 5xx transient after
Retry-After if given (never X-RateLimit-Reset, which every answer carries), else the retry
policy's backoff."""

from __future__ import annotations

from collections.abc import Mapping

import httpx

from tidings.providers._retry_after import parse_retry_after
from tidings.providers.base import (
    PermanentError,
    PoisonError,
    ProviderError,
    TransientError,
)

# Seconds before retrying after a credentials error (configuration, fixed by an operator).
CREDENTIALS_RETRY_AFTER = 300.0


def _error_messages(response: httpx.Response) -> str:
    try:
        errors = response.json().get("errors") or []
        return "; ".join(str(e.get("message")) for e in errors if isinstance(e, dict))
    except (ValueError, AttributeError):
        return response.text[:200]


def retry_after_seconds(headers: Mapping[str, str], now: float) -> float | None:
    """Seconds from Retry-After (seconds or HTTP date), else from X-RateLimit-Reset (epoch).

    ``headers`` must be case-insensitive (httpx.Headers).
    """
    retry_after = parse_retry_after(headers.get("Retry-After"), now)
    if retry_after is not None:
        return retry_after
    reset = headers.get("X-RateLimit-Reset")
    if reset is not None and reset.strip().isdigit():
        return max(0.0, float(reset) - now)
    return None


def classify(response: httpx.Response, now: float) -> ProviderError:
    """The error for a non-2xx answer, by HTTP status (``now``: for an HTTP-date wait)."""
    status = response.status_code
    detail = f"SendGrid {status}: {_error_messages(response)}"
    if status in (401, 403):
        return TransientError(detail, retry_after=CREDENTIALS_RETRY_AFTER, reason="credentials")
    if status == 413:
        return PoisonError(detail, reason="payload_too_large")
    if status == 429:
        retry_after = retry_after_seconds(response.headers, now)
        return TransientError(detail, retry_after=retry_after, reason="rate_limited")
    if status >= 500:
        # X-RateLimit-Reset is on every answer and says nothing about an outage: only a
        # Retry-After is the server's word; without one the retry policy's backoff waits.
        retry_after = parse_retry_after(response.headers.get("Retry-After"), now)
        return TransientError(detail, retry_after=retry_after, reason=f"http_{status}")
    if status == 408:
        return TransientError(detail, reason="http_408")
    return PermanentError(detail, reason="bad_request" if status == 400 else f"http_{status}")
