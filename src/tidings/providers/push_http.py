"""Small HTTP helpers the push adapters (FCM, APNs) share."""

from __future__ import annotations

import json
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
