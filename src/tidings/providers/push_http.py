"""Small HTTP helpers the push adapters (FCM, APNs) share."""

from __future__ import annotations

import email.utils
import json
from datetime import UTC
from typing import Any

import httpx

from tidings.providers.base import TransientError

# How long to wait before retrying when the account's configuration (credentials, a key
# registered with Firebase) is what failed: retrying sooner only fails again, and a
# permanent failure would lose messages that go through once the operator fixes it.
CONFIG_RETRY_AFTER = 300.0


def compact_json(value: Any) -> bytes:
    """The JSON bytes as sent (and as the provider's payload limit counts them)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def retry_after(headers: httpx.Headers, now: float) -> float | None:
    """Seconds from a ``Retry-After`` header (delta seconds or an HTTP date), if any."""
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, when.timestamp() - now)


def transport_failure(provider: str, error: httpx.HTTPError) -> TransientError:
    """A connection error or timeout: the provider may never have seen the request."""
    return TransientError(f"{provider}: {type(error).__name__}: {error}", reason="transport")


def json_body(response: httpx.Response) -> dict[str, Any]:
    """The response's JSON object, or {} when it has none."""
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}
