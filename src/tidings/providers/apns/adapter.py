"""Apple Push Notification service over HTTP/2, with token (JWT) authentication.

``POST {base_url}/3/device/{token}``; errors are ``{"reason": ...}`` classified per Apple's
table (docs/providers.md, How each adapter classifies errors, APNs).
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import httpx
import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ec import EllipticCurvePrivateKey
from pydantic import SecretStr, model_validator

from tidings.providers._push import (
    APNS_COLLAPSE_ID_LIMIT,
    CONFIG_RETRY_AFTER,
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
from tidings.states import Effect

PAYLOAD_LIMIT = 4096
COLLAPSE_ID_LIMIT = APNS_COLLAPSE_ID_LIMIT
# Apple: refresh the provider token no more often than every 20 minutes and at least
# every 60 (older: ExpiredProviderToken). We refresh after 50, leaving a margin.
TOKEN_MIN_AGE = 20 * 60
TOKEN_REFRESH_AGE = 50 * 60

# 400s that mean our request (or the account's topic) is wrong: retrying cannot help.
REQUEST_ERRORS = frozenset(
    {
        "BadCollapseId",
        "BadExpirationDate",
        "BadMessageId",
        "BadPriority",
        "BadTopic",
        "DuplicateHeaders",
        "InvalidPushType",
        "MissingDeviceToken",
        "MissingTopic",
        "PayloadEmpty",
        "TopicDisallowed",
        "BadPath",
        "MethodNotAllowed",
    }
)
# The device token is of no use (any more): deactivate it.
DEAD_TOKEN_ERRORS = frozenset(
    {"BadDeviceToken", "DeviceTokenNotForTopic", "Unregistered", "ExpiredToken"}
)
# 403s about our credentials: the device token is fine; the operator must fix the key.
CREDENTIAL_ERRORS = frozenset(
    {
        "BadCertificate",
        "BadCertificateEnvironment",
        "InvalidProviderToken",
        "MissingProviderToken",
        "UnrelatedKeyIdInToken",
        "BadEnvironmentKeyIdInToken",
        "Forbidden",
    }
)
RETRY_ERRORS = frozenset(
    {"IdleTimeout", "TooManyRequests", "InternalServerError", "ServiceUnavailable", "Shutdown"}
)


class ApnsAccount(AccountSettings):
    kind: Literal["apns"] = "apns"
    team_id: str
    key_id: str
    private_key_file: Path | None = None  # the .p8 file from Apple
    private_key: SecretStr | None = None  # or its PEM text
    topic: str  # the app's bundle id
    base_url: str = "https://api.push.apple.com"
    ca_file: Path | None = None  # extra trust root (a TLS-intercepting proxy, a test server)

    @model_validator(mode="after")
    def _one_key(self) -> ApnsAccount:
        return exactly_one(self, "private_key_file", "private_key")

    def signing_key(self) -> EllipticCurvePrivateKey:
        if self.private_key is not None:
            pem = self.private_key.get_secret_value().encode()
        else:
            assert self.private_key_file is not None
            pem = self.private_key_file.read_bytes()
        key = serialization.load_pem_private_key(pem, password=None)
        if not isinstance(key, EllipticCurvePrivateKey):
            raise ValueError("the APNs key is not an EC (P-256) key")
        return key


class ProviderToken:
    """The provider JWT, reused between 20 and 50 minutes of age.

    Minting is synchronous (no await), so concurrent senders never mint twice.
    """

    def __init__(
        self,
        team_id: str,
        key_id: str,
        key: EllipticCurvePrivateKey,
        clock: Callable[[], float],
    ) -> None:
        self._team_id = team_id
        self._key_id = key_id
        self._key = key
        self._clock = clock
        self.value = ""
        self.issued_at = 0.0

    def current(self) -> str:
        if not self.value or self.age() >= TOKEN_REFRESH_AGE:
            self._mint()
        return self.value

    def age(self) -> float:
        return self._clock() - self.issued_at

    def renew_refused(self, value: str) -> bool:
        """APNs called ``value`` expired. True when a new token may be used now: it was
        already replaced, or it is old enough to replace without TooManyProviderTokenUpdates."""
        if value != self.value:
            return True
        if self.age() < TOKEN_MIN_AGE:
            return False
        self._mint()
        return True

    def _mint(self) -> None:
        now = self._clock()
        self.value = jwt.encode(
            {"iss": self._team_id, "iat": int(now)},
            self._key,
            algorithm="ES256",
            headers={"kid": self._key_id},
        )
        self.issued_at = now


class ApnsProvider:
    def __init__(
        self, name: str, account: ApnsAccount, *, clock: Callable[[], float] = time.time
    ) -> None:
        self.name = name
        self.account = account
        self._clock = clock
        self.token = ProviderToken(account.team_id, account.key_id, account.signing_key(), clock)
        verify: ssl.SSLContext | bool = True
        if account.ca_file is not None:
            verify = ssl.create_default_context(cafile=str(account.ca_file))
        # APNs speaks only HTTP/2; over http:// (the simulator) that is h2c prior knowledge.
        self._client = httpx.AsyncClient(
            base_url=account.base_url,
            http1=False,
            http2=True,
            timeout=account.timeout,
            verify=verify,
        )

    async def send(self, message: Message) -> SendResult:
        headers = apns_headers(message, self.account.topic, self._clock())
        body = compact_json(apns_payload(message))
        if len(body) > PAYLOAD_LIMIT:
            raise PoisonError(
                f"apns payload is {len(body)} bytes, over {PAYLOAD_LIMIT}",
                reason="PayloadTooLarge",
            )
        token = self.token.current()
        response = await self._post(message.address, headers, body, token)
        if response.status_code == 403 and _reason(response) == "ExpiredProviderToken":
            if not self.token.renew_refused(token):
                wait = TOKEN_MIN_AGE - self.token.age()
                raise TransientError(
                    "apns: ExpiredProviderToken for a token younger than 20 minutes",
                    retry_after=wait,
                    reason="ExpiredProviderToken",
                )
            response = await self._post(message.address, headers, body, self.token.current())
        if response.status_code == 200:
            return SendResult(self.name, response.headers.get("apns-id"))
        raise classify(response, self._clock())

    async def close(self) -> None:
        await self._client.aclose()

    async def _post(
        self, device: str, headers: dict[str, str], body: bytes, token: str
    ) -> httpx.Response:
        headers = headers | {"authorization": f"bearer {token}"}
        return await post(
            self._client, "apns", f"/3/device/{device}", content=body, headers=headers
        )


def is_alert(message: Message) -> bool:
    return message.content.subject is not None or bool(message.content.text)


def apns_headers(message: Message, topic: str, now: float) -> dict[str, str]:
    """Request headers (without authorization); PoisonError for an oversized collapse id."""
    alert = is_alert(message)
    headers = {
        "apns-topic": topic,
        "apns-push-type": "alert" if alert else "background",
        # Background pushes must use 5 (Apple); 10 only for urgent alerts.
        "apns-priority": apns_priority(alert, message.priority),
        "apns-id": str(message.delivery_id),  # APNs' own message id: lowercase UUID
        "content-type": "application/json",
    }
    if message.ttl_seconds is not None:
        ttl = max(message.ttl_seconds, 0)
        # 0: one attempt, not stored; otherwise stored until then.
        headers["apns-expiration"] = "0" if ttl == 0 else str(int(now) + ttl)
    if message.collapse_key:
        if len(message.collapse_key.encode()) > COLLAPSE_ID_LIMIT:
            raise PoisonError(
                f"apns collapse id longer than {COLLAPSE_ID_LIMIT} bytes", reason="BadCollapseId"
            )
        headers["apns-collapse-id"] = message.collapse_key
    return headers


def apns_payload(message: Message) -> dict[str, Any]:
    content = message.content
    if "aps" in content.data:
        raise PoisonError("apns: data may not carry an 'aps' key", reason="reserved_data_key")
    if not is_alert(message):
        return {"aps": {"content-available": 1}, **content.data}
    alert = {"title": content.subject, "body": content.text or None}
    return {"aps": {"alert": {k: v for k, v in alert.items() if v is not None}}, **content.data}


def _reason(response: httpx.Response) -> str | None:
    reason = json_body(response).get("reason")
    return str(reason) if reason else None


def _unregistered_since(response: httpx.Response) -> datetime | None:
    """A 410's ``timestamp`` (milliseconds): the last time APNs confirmed the token was no
    longer valid. Apple: a token registered again after it must keep receiving pushes."""
    timestamp = json_body(response).get("timestamp")
    if isinstance(timestamp, str) and timestamp.isdigit():
        timestamp = int(timestamp)
    if isinstance(timestamp, bool) or not isinstance(timestamp, int | float):
        return None
    try:
        return datetime.fromtimestamp(timestamp / 1000, UTC)
    except (OverflowError, OSError, ValueError):
        return None


def classify(response: httpx.Response, now: float) -> ProviderError:
    """The error for a non-200 answer, by Apple's reason, else by HTTP status."""
    status = response.status_code
    reason = _reason(response)
    text = f"apns: {status} {reason or ''}"
    wait = parse_retry_after(response.headers.get("retry-after"), now)
    if reason in DEAD_TOKEN_ERRORS:
        since = _unregistered_since(response) if status == 410 else None
        if since is not None:
            text += f" since {since.isoformat()}"
        return PermanentError(text, effect=Effect.DEACTIVATE_DEVICE, reason=reason, effect_at=since)
    if reason in REQUEST_ERRORS:
        return PermanentError(text, reason=reason)
    if reason == "PayloadTooLarge" or status == 413:
        return PoisonError(text, reason=reason or "PayloadTooLarge")
    if reason in CREDENTIAL_ERRORS:
        return TransientError(text, retry_after=CONFIG_RETRY_AFTER, reason=reason)
    if reason == "TooManyProviderTokenUpdates":
        # Our token cache failed; the next tokens come at most every 20 minutes anyway.
        return TransientError(text, retry_after=max(wait or 0, 60.0), reason=reason)
    if reason == "ExpiredProviderToken" or reason in RETRY_ERRORS:
        return TransientError(text, retry_after=wait, reason=reason)
    if status == 429 or status >= 500:
        return TransientError(text, retry_after=wait, reason=reason or str(status))
    return PermanentError(text, reason=reason or str(status))
