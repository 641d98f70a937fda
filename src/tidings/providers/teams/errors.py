"""The error table of a Teams Workflows webhook, a Power Automate (Logic Apps) request
trigger: ``{"error": {"code", "message"}}`` with an HTTP status. Sources: Microsoft Learn,
"Create incoming webhooks with Workflows for Microsoft Teams" (the trigger, the card
payload, the retirement of Office 365 connectors), Logic Apps' "Limits and configuration"
(request trigger throttling, 429 with Retry-After) and the workflow REST errors
(WorkflowNotFound, AuthorizationFailed / invalid signature, WorkflowTriggerIsNotEnabled,
TriggerInputSchemaMismatch)."""

from __future__ import annotations

from typing import Any

import httpx

from tidings.providers._chat import DEFAULT_THROTTLE_SECONDS
from tidings.providers._retry_after import parse_retry_after
from tidings.providers.base import (
    PermanentError,
    PoisonError,
    ProviderError,
    TransientError,
)
from tidings.states import Effect

GONE = Effect.SUPPRESS_ADDRESS  # the workflow's URL will never work again


def classify(response: httpx.Response) -> ProviderError:
    status = response.status_code
    code, text = _error(response)
    described = f"teams workflow {status} {code}: {text}"
    if status == 429:
        # One workflow's trigger limit: only its delivery waits, the account is not paused.
        retry = parse_retry_after(response.headers.get("retry-after"))
        return TransientError(
            described, retry_after=retry or DEFAULT_THROTTLE_SECONDS, reason="rate_limited_route"
        )
    if status == 404:
        # The workflow was deleted: its URL will never work again.
        return PermanentError(described, effect=GONE, reason="workflow_not_found")
    if status == 401:
        # The URL's signature (sig=) is not the workflow's: the URL is wrong for good.
        return PermanentError(described, effect=GONE, reason="invalid_signature")
    if status in (400, 413):
        return PoisonError(described, reason="invalid_card" if status == 400 else "too_large")
    if status >= 500 or status == 408:
        retry = parse_retry_after(response.headers.get("retry-after"))
        return TransientError(described, retry_after=retry, reason=f"http_{status}")
    # 403 (a tenant policy, the flow's owner), 409 (the workflow turned off): fixable in
    # Teams or Power Automate, then replayable from the dead letters.
    reason = "workflow_disabled" if status == 409 else f"http_{status}"
    return PermanentError(described, reason=reason)


def _error(response: httpx.Response) -> tuple[str, str]:
    try:
        body: Any = response.json()
    except ValueError:
        return "", response.text[:200]
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return "", str(body)[:200]
    return str(error.get("code", "")), str(error.get("message", ""))[:200]
