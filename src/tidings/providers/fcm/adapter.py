"""Firebase Cloud Messaging, HTTP v1 API.

``POST {base_url}/v1/projects/{project}/messages:send`` with an OAuth2 access token of a
service account. Errors are classified by the ``FcmError`` errorCode in the error details
(docs/providers.md, How each adapter classifies errors, FCM).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import httpx
from pydantic import SecretStr, model_validator

from tidings.priorities import Priority
from tidings.providers._push import (
    CONFIG_RETRY_AFTER,
    apns_collapse_id,
    apns_priority,
    compact_json,
    json_body,
    post,
)
from tidings.providers._retry_after import parse_retry_after
from tidings.providers.accounts import AccountSettings, exactly_one
from tidings.providers.base import (
    Message,
    PermanentError,
    PoisonError,
    ProviderError,
    SendResult,
    TransientError,
)
from tidings.providers.fcm.google_auth import AccessTokens, ServiceAccount
from tidings.states import Effect

PAYLOAD_LIMIT = 4096
MAX_TTL = 2_419_200  # 28 days, FCM's maximum android.ttl
# FCM has no idempotency key: the delivery id travels as a data key, for tracing and so
# that the simulator can count duplicates.
DELIVERY_ID_KEY = "tidings_delivery_id"
FCM_ERROR_TYPE = "type.googleapis.com/google.firebase.fcm.v1.FcmError"
BAD_REQUEST_TYPE = "type.googleapis.com/google.rpc.BadRequest"


class FcmAccount(AccountSettings):
    kind: Literal["fcm"] = "fcm"
    # Default: the service account's project_id.
    project_id: str | None = None
    service_account_file: Path | None = None
    service_account_json: SecretStr | None = None
    base_url: str = "https://fcm.googleapis.com"
    # Overrides the service account's token_uri (the simulator's OAuth endpoint).
    token_uri: str | None = None

    @model_validator(mode="after")
    def _one_credential(self) -> FcmAccount:
        return exactly_one(self, "service_account_file", "service_account_json")

    def service_account(self) -> ServiceAccount:
        if self.service_account_json is not None:
            return ServiceAccount.from_json(self.service_account_json.get_secret_value())
        assert self.service_account_file is not None
        return ServiceAccount.from_file(self.service_account_file)


class FcmProvider:
    def __init__(
        self, name: str, account: FcmAccount, *, clock: Callable[[], float] = time.time
    ) -> None:
        self.name = name
        self.account = account
        service_account = account.service_account()
        project = account.project_id or service_account.project_id
        if not project:
            raise ValueError("FCM account needs a project_id (none in the service account)")
        self.project_id = project
        self._clock = clock
        self._client = httpx.AsyncClient(http2=True, timeout=account.timeout)
        self._url = f"{account.base_url.rstrip('/')}/v1/projects/{project}/messages:send"
        self.tokens = AccessTokens(
            service_account, self._client, token_uri=account.token_uri, clock=clock
        )

    async def send(self, message: Message) -> SendResult:
        body = fcm_request(message, self._clock())
        access_token = await self.tokens.get()
        response = await self._post(body, access_token)
        if response.status_code == 401 and _error_code(json_body(response)) is None:
            # Our access token was refused (expired early, revoked): one fresh try.
            self.tokens.invalidate(access_token)
            response = await self._post(body, await self.tokens.get())
        if response.status_code == 200:
            return SendResult(self.name, json_body(response).get("name"))
        raise classify(response, self._clock())

    async def close(self) -> None:
        await self._client.aclose()

    async def _post(self, body: dict[str, Any], access_token: str) -> httpx.Response:
        headers = {
            "authorization": f"Bearer {access_token}",
            "content-type": "application/json; charset=UTF-8",
        }
        return await post(
            self._client, "fcm", self._url, content=compact_json(body), headers=headers
        )


def fcm_request(message: Message, now: float) -> dict[str, Any]:
    """The send request body; PoisonError when FCM would refuse the message itself."""
    content = message.content
    payload: dict[str, Any] = {}
    if has_notification(message):
        notification = {"title": content.subject, "body": content.text or None}
        payload["notification"] = {k: v for k, v in notification.items() if v is not None}
    payload["data"] = fcm_data(content.data) | {DELIVERY_ID_KEY: message.idempotency_key}
    size = len(compact_json(payload))
    if size > PAYLOAD_LIMIT:
        raise PoisonError(
            f"fcm payload is {size} bytes, over {PAYLOAD_LIMIT}", reason="payload_too_large"
        )
    body = {"token": message.address, **payload}
    body["android"] = _android(message)
    body["apns"] = _apns(message, now)
    return {"validate_only": False, "message": body}


def has_notification(message: Message) -> bool:
    """Something to show (a title or a body); else a data-only message."""
    return message.content.subject is not None or bool(message.content.text)


def fcm_data(data: dict[str, Any]) -> dict[str, str]:
    """FCM data values must be strings; reserved keys are refused."""
    out: dict[str, str] = {}
    for key, value in data.items():
        lowered = key.lower()
        if lowered in ("from", "message_type") or lowered.startswith(("google", "gcm")):
            raise PoisonError(f"fcm data key {key!r} is reserved", reason="reserved_data_key")
        out[key] = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
    return out


def _android(message: Message) -> dict[str, Any]:
    android: dict[str, Any] = {
        "priority": "HIGH" if message.priority is Priority.HIGH else "NORMAL"
    }
    if message.ttl_seconds is not None:
        android["ttl"] = f"{min(max(message.ttl_seconds, 0), MAX_TTL)}s"
    if message.collapse_key:
        android["collapse_key"] = message.collapse_key
    return android


def _apns(message: Message, now: float) -> dict[str, Any]:
    """The apns block, which FCM hands to APNs for Apple devices only, so the adapter need
    not know the device's platform: Android reads the android block alone. A data-only
    message is a background push for Apple: priority 5 and content-available."""
    alert = has_notification(message)
    headers = {
        "apns-priority": apns_priority(alert, message.priority),
        "apns-push-type": "alert" if alert else "background",
    }
    if message.ttl_seconds is not None:
        ttl = max(message.ttl_seconds, 0)
        headers["apns-expiration"] = "0" if ttl == 0 else str(int(now) + ttl)
    if message.collapse_key:
        # Hashed when over Apple's 64 bytes rather than refused: poison would also fail the
        # message for Android devices, whose collapse_key has no such limit.
        headers["apns-collapse-id"] = apns_collapse_id(message.collapse_key)
    if alert:
        return {"headers": headers}
    return {"headers": headers, "payload": {"aps": {"content-available": 1}}}


def _error_code(body: dict[str, Any]) -> str | None:
    error = body.get("error")
    if not isinstance(error, dict):
        return None
    for detail in error.get("details") or []:
        if isinstance(detail, dict) and detail.get("@type") == FCM_ERROR_TYPE:
            code = detail.get("errorCode")
            return str(code) if code else None
    return None


def _token_is_invalid(error: dict[str, Any]) -> bool:
    """INVALID_ARGUMENT about the registration token itself (not about the message): FCM
    says so with a BadRequest field violation on message.token. The error's message text
    is never read: it may name the token while the fault is elsewhere."""
    for detail in error.get("details") or []:
        if isinstance(detail, dict) and detail.get("@type") == BAD_REQUEST_TYPE:
            for violation in detail.get("fieldViolations") or []:
                if isinstance(violation, dict) and violation.get("field") == "message.token":
                    return True
    return False


def classify(response: httpx.Response, now: float) -> ProviderError:
    """The error for a non-200 answer, by FcmError errorCode, else by HTTP status."""
    body = json_body(response)
    error = body.get("error") if isinstance(body.get("error"), dict) else {}
    assert isinstance(error, dict)
    code = _error_code(body)
    status = response.status_code
    text = f"fcm: {status} {code or error.get('status', '')}: {error.get('message', '')}"
    wait = parse_retry_after(response.headers.get("retry-after"), now)
    if code == "UNREGISTERED":
        return PermanentError(text, effect=Effect.DEACTIVATE_DEVICE, reason=code)
    if code == "INVALID_ARGUMENT":
        effect = Effect.DEACTIVATE_DEVICE if _token_is_invalid(error) else None
        return PermanentError(text, effect=effect, reason=code)
    if code in ("QUOTA_EXCEEDED", "UNAVAILABLE", "INTERNAL"):
        return TransientError(text, retry_after=wait, reason=code)
    if code in ("THIRD_PARTY_AUTH_ERROR", "SENDER_ID_MISMATCH"):
        # Configuration, not the device: the APNs certificate/key or web push credentials
        # registered with Firebase are wrong or expired, or the token belongs to another
        # Firebase project than this account's (the wrong project here, or in the app).
        # Keep the token and retry late, while the operator fixes the project.
        return TransientError(text, retry_after=max(wait or 0, CONFIG_RETRY_AFTER), reason=code)
    return _by_status(status, text, wait, code)


def _by_status(status: int, text: str, wait: float | None, code: str | None) -> ProviderError:
    """No known errorCode (UNSPECIFIED_ERROR, a proxy's answer): go by the HTTP status."""
    reason = code or str(status)
    if status == 429 or status >= 500:
        return TransientError(text, retry_after=wait, reason=reason)
    if status in (401, 403):
        # Our credentials or the project's permissions: configuration, not the message.
        return TransientError(text, retry_after=CONFIG_RETRY_AFTER, reason=reason)
    return PermanentError(text, reason=reason)
