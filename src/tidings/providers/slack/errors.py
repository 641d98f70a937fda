"""Slack's error table. The Web API answers HTTP 200 with ``{"ok": false, "error": <code>}``
(429 with Retry-After when rate limited); incoming webhooks answer an HTTP status with the
code as plain text. Sources: api.slack.com/methods/chat.postMessage (Errors) and
api.slack.com/messaging/webhooks (Handling errors), api.slack.com/docs/rate-limits."""

from __future__ import annotations

import httpx

from tidings.providers._chat import DEFAULT_THROTTLE_SECONDS, config_error
from tidings.providers._retry_after import parse_retry_after
from tidings.providers.base import (
    PermanentError,
    PoisonError,
    ProviderError,
    TransientError,
)
from tidings.states import Effect

# The token or the app: an operator fixes them, then every waiting message can go.
CONFIG = frozenset(
    {
        "invalid_auth",
        "not_authed",
        "account_inactive",
        "token_revoked",
        "token_expired",
        "missing_scope",
        "no_permission",
        "not_allowed_token_type",
        "team_access_not_granted",
        "ekm_access_denied",
        "org_login_required",
        # Incoming webhooks: the workspace or its token.
        "invalid_token",
        "team_disabled",
    }
)
# The message itself can never be posted.
POISON = frozenset(
    {
        "msg_too_long",
        "no_text",
        "invalid_blocks",
        "invalid_blocks_format",
        "too_many_attachments",
        "invalid_arguments",
        "invalid_metadata_format",
        "invalid_metadata_schema",
        "metadata_too_large",
        "invalid_payload",
    }
)
# Slack's side: try again.
TRANSIENT = frozenset(
    {"internal_error", "fatal_error", "service_unavailable", "request_timeout", "rollup_error"}
)
# An incoming webhook that will never work again (removed, its channel gone or archived):
# its URL is suppressed, as the webhook channel suppresses an endpoint answering 410.
DEAD_WEBHOOK = frozenset(
    {"no_service", "no_active_hooks", "no_team", "channel_not_found", "channel_is_archived"}
)


def classify_api(response: httpx.Response, error: str) -> ProviderError:
    """A Web API answer that is not ok (``error`` its code; empty when unreadable)."""
    described = f"slack {response.status_code} {error or 'unreadable answer'}"
    if response.status_code == 429 or error in ("ratelimited", "rate_limited"):
        return _throttled(described, response)
    if error in CONFIG:
        return config_error(described, error)
    if error in POISON:
        return PoisonError(described, reason=error)
    if error in TRANSIENT or response.status_code >= 500 or not error:
        return TransientError(described, reason=error or f"http_{response.status_code}")
    # channel_not_found (or private and the bot not in it), not_in_channel (invite the
    # bot), is_archived, user_not_found...: this address, this time; replayable from the
    # dead letters once fixed, so nothing is suppressed.
    return PermanentError(described, reason=error)


def classify_webhook(response: httpx.Response) -> ProviderError:
    """An incoming webhook's non-200 answer."""
    error = response.text.strip()[:100]
    described = f"slack webhook {response.status_code} {error}"
    if response.status_code == 429:
        return _throttled(described, response)
    if error in DEAD_WEBHOOK:
        return PermanentError(described, effect=Effect.SUPPRESS_ADDRESS, reason=error)
    if error in CONFIG:
        return config_error(described, error)
    if error in POISON or error == "no_text":
        return PoisonError(described, reason=error)
    if error in TRANSIENT or response.status_code >= 500:
        return TransientError(described, reason=error or f"http_{response.status_code}")
    # action_prohibited, posting_to_general_channel_denied, user_not_found...
    return PermanentError(described, reason=error or f"http_{response.status_code}")


def _throttled(described: str, response: httpx.Response) -> TransientError:
    retry = parse_retry_after(response.headers.get("retry-after"))
    return TransientError(
        described, retry_after=retry or DEFAULT_THROTTLE_SECONDS, reason="rate_limited"
    )
