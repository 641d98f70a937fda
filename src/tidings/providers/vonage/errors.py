"""Vonage's error table: a non-2xx answer of the Messages API as a typed provider error.

Errors are RFC 7807 problem JSON (``type``, ``title``, ``detail``, ``instance``, and for 422
``invalid_parameters``); they are classified by HTTP status, the words only describe.
"""

from __future__ import annotations

from typing import Any

import httpx

from tidings.providers._retry_after import parse_retry_after
from tidings.providers.base import PermanentError, ProviderError, TransientError
from tidings.states import Effect

# Credentials, balance and permissions are our configuration, not the message: retry late
# (docs/providers.md, configuration errors) so nothing is lost while an operator fixes them.
CONFIG_RETRY_SECONDS = 300.0
# Vonage's 429 carries no documented Retry-After: back off a second unless it sends one.
DEFAULT_THROTTLE_SECONDS = 1.0
CONFIG_STATUSES = {401: "auth_failed", 402: "low_balance", 403: "forbidden"}


def classify(response: httpx.Response) -> ProviderError:
    """The error for a non-2xx answer, by HTTP status (the problem's words only describe)."""
    status = response.status_code
    problem = _problem(response)
    described = f"vonage {status} {problem.get('title', '')}: {problem.get('detail', '')}"[:500]
    wait = parse_retry_after(response.headers.get("retry-after"))
    if status in CONFIG_STATUSES:
        return TransientError(
            described, retry_after=CONFIG_RETRY_SECONDS, reason=CONFIG_STATUSES[status]
        )
    if status == 429:
        return TransientError(
            described, retry_after=wait or DEFAULT_THROTTLE_SECONDS, reason="rate_limited"
        )
    if status >= 500:
        return TransientError(described, retry_after=wait, reason=f"http_{status}")
    if status == 422 and "to" in _invalid_names(problem):
        return PermanentError(described, effect=Effect.SUPPRESS_ADDRESS, reason="invalid_number")
    return PermanentError(described, reason=f"http_{status}")


def _problem(response: httpx.Response) -> dict[str, Any]:
    """The RFC 7807 body, or {} when the answer has none."""
    try:
        body = response.json()
    except ValueError:
        return {"detail": response.text[:200]}
    return body if isinstance(body, dict) else {}


def _invalid_names(problem: dict[str, Any]) -> set[str]:
    """The parameters a 422 names as invalid (``invalid_parameters[].name``)."""
    listed = problem.get("invalid_parameters")
    if not isinstance(listed, list):
        return set()
    return {str(item.get("name")) for item in listed if isinstance(item, dict)}
