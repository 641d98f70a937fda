"""Small HTTP helpers the push adapters (FCM, APNs) share, and Apple's header rules that
both follow (APNs directly, FCM in the apns block it hands to APNs)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import httpx

from tidings.priorities import Priority
from tidings.providers._http import no_answer
from tidings.providers.base import TransientError

APNS_COLLAPSE_ID_LIMIT = 64  # bytes (Apple: longer is 400 BadCollapseId)

# How long to wait before retrying when the account's configuration (credentials, a key
# registered with Firebase) is what failed: retrying sooner only fails again, and a
# permanent failure would lose messages that go through once the operator fixes it.
CONFIG_RETRY_AFTER = 300.0


def compact_json(value: Any) -> bytes:
    """The JSON bytes as sent (and as the provider's payload limit counts them)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def transport_failure(provider: str, error: httpx.HTTPError) -> TransientError:
    """A connection error or timeout; ambiguous once the request may have been sent."""
    if isinstance(error, httpx.TransportError):
        return no_answer(provider, error)
    return TransientError(f"{provider}: {type(error).__name__}: {error}", reason="transport")


async def post(
    client: httpx.AsyncClient, provider: str, url: str, **request: Any
) -> httpx.Response:
    """POST, a transport failure raised as a TransientError. A request that could not even
    be written (its pooled connection was closed, as after an HTTP/2 GOAWAY: APNs'
    Shutdown) never reached the provider: it goes once more, on a new connection."""
    try:
        try:
            return await client.post(url, **request)
        except httpx.WriteError:
            return await client.post(url, **request)
    except httpx.HTTPError as error:
        raise transport_failure(provider, error) from error


def json_body(response: httpx.Response) -> dict[str, Any]:
    """The response's JSON object, or {} when it has none."""
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def apns_priority(alert: bool, priority: Priority) -> str:
    """Apple: 10 sends at once, for an alert; a push that shows nothing (background) must
    use 5, and APNs refuses it with 10."""
    return "10" if alert and priority is Priority.HIGH else "5"


def apns_collapse_id(key: str) -> str:
    """``key`` as an apns-collapse-id: itself up to 64 bytes, else its head and a digest,
    the same for every device and process (so collapsing still works) and within 64 bytes."""
    raw = key.encode()
    if len(raw) <= APNS_COLLAPSE_ID_LIMIT:
        return key
    digest = hashlib.sha256(raw).hexdigest()[:16]
    head = raw[: APNS_COLLAPSE_ID_LIMIT - len(digest) - 1].decode("utf-8", "ignore")
    return f"{head}~{digest}"
