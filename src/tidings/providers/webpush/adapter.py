"""Web Push to browsers: RFC 8030 (the push protocol), RFC 8291 (message encryption,
``aes128gcm``) and RFC 8292 (VAPID), with no intermediary of ours.

The delivery's address is the browser's push subscription (``webpush_subscription``); the
request is ``POST {endpoint}`` with the encrypted JSON payload and the headers ``TTL``,
``Urgency`` and, for a type with a collapse key, ``Topic``. The endpoint's host comes from
the subscription, that is from whoever registered the device: it is checked and pinned
(``pinned_http``) unless the account allows private targets.
"""

from __future__ import annotations

import base64
import hashlib
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import httpx
from pydantic import Field, SecretStr, model_validator

from tidings.priorities import Priority
from tidings.providers import pinned_http
from tidings.providers._push import CONFIG_RETRY_AFTER, compact_json
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
from tidings.providers.webpush import crypto as webpush_crypto
from tidings.providers.webpush import subscription as webpush_subscription
from tidings.states import Effect

# RFC 8030: a push service must take 4096 bytes of (encrypted) payload; more may be
# refused with 413, so a bigger message is poison before it is sent.
MAX_BODY_BYTES = 4096
MAX_TTL = 2_419_200  # 28 days; the longest that push services commonly keep a message
TOPIC_CHARS = 32  # RFC 8030 §5.4: at most 32 characters of the URL-safe base64 alphabet
_TOPIC = re.compile(r"[A-Za-z0-9_-]{1,32}")
DEFAULT_THROTTLE_SECONDS = 1.0
# The subscription expired or the user revoked it: the browser will never get it again.
GONE = {404: "subscription_not_found", 410: "subscription_gone"}
# RFC 8292 §4.2: the push service refuses our VAPID JWT or key (400 for a bad header).
CONFIG_STATUSES = {400: "bad_request", 401: "vapid_unauthorized", 403: "vapid_forbidden"}
DELIVERY_ID_KEY = "delivery_id"
USER_AGENT = "tidings-webpush/1"


class WebPushAccount(AccountSettings):
    kind: Literal["webpush"] = "webpush"
    # The application server's VAPID key pair, as PEM or base64url (exactly one of these).
    vapid_private_key: SecretStr | None = None
    vapid_private_key_file: Path | None = None
    # Who push services may contact about our traffic (RFC 8292 §2.1).
    vapid_subject: str = Field(pattern=r"^(mailto:[^@\s]+@[^@\s]+|https://[^\s/]+\S*)$")
    allow_private: bool = False  # loopback/private endpoints (the simulator, tests)
    allow_insecure: bool = False  # plain http:// endpoints (the simulator, tests)

    @model_validator(mode="after")
    def _one_key(self) -> WebPushAccount:
        exactly_one(self, "vapid_private_key", "vapid_private_key_file")
        webpush_crypto.load_vapid(self.vapid_key_text())  # refuse a bad key at start-up
        return self

    def vapid_key_text(self) -> str:
        if self.vapid_private_key is not None:
            return self.vapid_private_key.get_secret_value()
        assert self.vapid_private_key_file is not None
        try:
            return self.vapid_private_key_file.read_text()
        except OSError as error:  # a configuration error, not a crash at start-up
            raise ValueError(f"cannot read vapid_private_key_file: {error}") from None


class WebPushProvider:
    def __init__(
        self, name: str, account: WebPushAccount, *, clock: Callable[[], float] = time.time
    ) -> None:
        self.name = name
        self.account = account
        self._vapid = webpush_crypto.load_vapid(account.vapid_key_text())
        self._clock = clock
        self._client = httpx.AsyncClient(
            http2=True,
            timeout=account.timeout,
            follow_redirects=False,
            trust_env=False,  # a proxy from the environment would bypass the address check
            limits=httpx.Limits(max_connections=account.max_in_flight),
            headers={"user-agent": USER_AGENT},
        )

    async def send(self, message: Message) -> SendResult:
        subscription = _subscription(message.address)
        url = pinned_http.target(subscription.endpoint, self.account.allow_insecure)
        body = encrypted_body(message, subscription)
        addresses = await pinned_http.checked_addresses(url, self.account.allow_private)
        headers = self.headers(message, subscription.endpoint)
        answer = await pinned_http.post(self._client, "webpush", url, addresses, body, headers)
        if 200 <= answer.status < 300:
            return SendResult(self.name, _message_id(answer.headers.get("location")))
        raise classify(answer)

    def headers(self, message: Message, endpoint: str) -> dict[str, str]:
        now = self._clock()
        headers = {
            "authorization": webpush_crypto.authorization(
                self._vapid, endpoint, self.account.vapid_subject, now
            ),
            "content-encoding": "aes128gcm",
            "content-type": "application/octet-stream",
            "ttl": str(ttl(message.ttl_seconds)),
            "urgency": "high" if message.priority is Priority.HIGH else "normal",
        }
        if message.collapse_key:
            headers["topic"] = topic(message.collapse_key)
        return headers

    async def close(self) -> None:
        await self._client.aclose()


def payload(message: Message) -> dict[str, Any]:
    """What the service worker's ``push`` event reads (``event.data.json()``)."""
    content = message.content
    shown = {"title": content.subject, "body": content.text or None}
    found: dict[str, Any] = {k: v for k, v in shown.items() if v is not None}
    found["data"] = content.data
    found[DELIVERY_ID_KEY] = message.idempotency_key
    return found


def encrypted_body(message: Message, subscription: webpush_subscription.Subscription) -> bytes:
    body = webpush_crypto.encrypt(compact_json(payload(message)), subscription)
    if len(body) > MAX_BODY_BYTES:
        raise PoisonError(
            f"web push body is {len(body)} bytes encrypted, over {MAX_BODY_BYTES}",
            reason="payload_too_large",
        )
    return body


def ttl(seconds: int | None) -> int:
    """RFC 8030 §5.2: how long the push service keeps an undelivered message (0: deliver
    now or drop it); the type's TTL, else the longest we ask for."""
    return MAX_TTL if seconds is None else min(max(seconds, 0), MAX_TTL)


def topic(collapse_key: str) -> str:
    """The key itself when it is a valid Topic, else a digest of it in 32 URL-safe base64
    characters: the same in every process, so collapsing still works."""
    if _TOPIC.fullmatch(collapse_key):
        return collapse_key
    digest = hashlib.sha256(collapse_key.encode()).digest()[:24]  # 24 bytes: 32 characters
    return base64.urlsafe_b64encode(digest).decode("ascii")


def classify(answer: pinned_http.Answer) -> ProviderError:
    status = answer.status
    described = f"webpush {status}: {answer.body[:200].decode('utf-8', 'replace')}"
    wait = parse_retry_after(answer.headers.get("retry-after"))
    if status in GONE:
        return PermanentError(described, effect=Effect.DEACTIVATE_DEVICE, reason=GONE[status])
    if status == 413:
        return PoisonError(described, reason="payload_too_large")
    if status == 429:
        return TransientError(
            described, retry_after=wait or DEFAULT_THROTTLE_SECONDS, reason="rate_limited"
        )
    if status in CONFIG_STATUSES:
        return TransientError(
            described,
            retry_after=max(wait or 0, CONFIG_RETRY_AFTER),
            reason=CONFIG_STATUSES[status],
        )
    if status >= 500:
        return TransientError(described, retry_after=wait, reason=f"http_{status}")
    if 300 <= status < 400:
        return PermanentError(f"{described} (redirects are not followed)", reason="redirect")
    return PermanentError(described, reason=f"http_{status}")


def _subscription(address: str) -> webpush_subscription.Subscription:
    try:
        return webpush_subscription.parse(address)
    except ValueError as error:
        # Not deactivated: an opaque token (FCM's) routed here is a chain to fix, not a
        # dead device.
        raise PermanentError(
            f"not a push subscription: {error}", reason="invalid_subscription"
        ) from None


def _message_id(location: str | None) -> str | None:
    """The push message resource's last path segment (RFC 8030 §5: its Location)."""
    if not location:
        return None
    return location.rstrip("/").rpartition("/")[2][:255] or None
