"""The Cloud API's error table: ``{"error": {"code", "message", "error_subcode",
"error_data": {"details"}}}``, classified by code. Source: Meta for Developers, WhatsApp
Cloud API, "Error codes" (developers.facebook.com/docs/whatsapp/cloud-api/support/
error-codes) and "Throughput" / "Rate limits" (pair rate: one message every 6 s to one
user)."""

from __future__ import annotations

from typing import Any

import httpx

from tidings.providers._chat import DEFAULT_THROTTLE_SECONDS, config_error
from tidings.providers._retry_after import parse_retry_after
from tidings.providers.base import (
    PermanentError,
    PoisonError,
    ProviderError,
    TransientError,
)

PAIR_RATE_SECONDS = 6.0  # the pair rate: about one message every 6 s to one number
APP_RATE_SECONDS = 60.0  # the app's or account's call limit: Meta's guidance is to wait
# Our token, account, number or template: an operator fixes them (transient, 300 s).
CONFIG = {
    0: "auth_exception",
    3: "capability",
    10: "permission_denied",
    190: "access_token_expired",
    200: "permission_denied",
    368: "temporarily_blocked",
    131005: "access_denied",
    131031: "account_locked",
    133010: "number_not_registered",
    132001: "template_not_found",
    132007: "template_policy",
    132015: "template_paused",
    132016: "template_disabled",
}
# The message itself can never be sent.
POISON = {
    100: "invalid_parameter",
    131008: "parameter_missing",
    131009: "parameter_invalid",
    131051: "unsupported_type",
    132000: "parameter_count_mismatch",
    132012: "parameter_format_mismatch",
}
TRANSIENT = {
    1: "api_unknown",
    2: "api_service",
    131000: "something_went_wrong",
    131016: "unavailable",
}
PERMANENT = {
    131047: "reengagement_required",  # free text outside the 24-hour window: send a template
    131026: "undeliverable",  # not on WhatsApp, old app, terms not accepted
    131021: "recipient_is_sender",
    131030: "recipient_not_allowed",  # a test number's allowed list
}


def classify(response: httpx.Response) -> ProviderError:
    code, text = _error(response)
    described = f"whatsapp {response.status_code} {code}: {text}"
    if code == 130429:  # the number's throughput
        wait = DEFAULT_THROTTLE_SECONDS
        return TransientError(described, retry_after=wait, reason="rate_limited")
    if code == 131056:  # too many to this one number: only its delivery waits
        wait = PAIR_RATE_SECONDS
        return TransientError(described, retry_after=wait, reason="rate_limited_route")
    if code in (4, 80007, 131048) or response.status_code == 429:
        retry = parse_retry_after(response.headers.get("retry-after")) or APP_RATE_SECONDS
        return TransientError(described, retry_after=retry, reason="rate_limited")
    if code in CONFIG or response.status_code == 401:
        return config_error(described, CONFIG.get(code or 0, "unauthorized"))
    if code in POISON:
        return PoisonError(described, reason=POISON[code or 0])
    if code in TRANSIENT or response.status_code >= 500:
        reason = TRANSIENT.get(code or 0, f"http_{response.status_code}")
        return TransientError(described, reason=reason)
    return PermanentError(described, reason=PERMANENT.get(code or 0, f"whatsapp_{code}"))


def _error(response: httpx.Response) -> tuple[int | None, str]:
    try:
        body: Any = response.json()
    except ValueError:
        return None, response.text[:200]
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return None, str(body)[:200]
    code = error.get("code")
    data = error.get("error_data")
    details = data.get("details") if isinstance(data, dict) else None
    return (code if isinstance(code, int) else None), str(details or error.get("message", ""))[:200]
