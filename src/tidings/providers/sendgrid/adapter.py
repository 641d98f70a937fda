"""The SendGrid v3 Mail Send adapter (httpx).

``POST {base_url}/v3/mail/send`` with ``Authorization: Bearer <api key>``; one
personalization per delivery, whose ``custom_args.delivery_id`` comes back in Event Webhook
events. SendGrid has no idempotency key; the delivery id is the custom arg that lets events
(and the simulator) recognise a repeated send.

Classification: 202 accepted (``X-Message-Id``); 400 a request SendGrid will refuse again
(permanent, nothing suppressed: a malformed address is not a bounce); 401/403 our
credentials or sender identity (transient with a long retry, so that no delivery is lost or
address suppressed while an operator fixes the key); 413 poison; 429 transient after
Retry-After or X-RateLimit-Reset; 5xx transient after Retry-After if given (never
X-RateLimit-Reset, which every answer carries), else the retry policy's backoff; network
errors transient. An email without a subject is poison before any request (SendGrid
refuses it).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, Literal

import httpx
from pydantic import SecretStr, field_validator

from tidings.providers._http import no_answer, pooled_client
from tidings.providers._retry_after import parse_retry_after
from tidings.providers.accounts import AccountSettings
from tidings.providers.base import (
    Message,
    PermanentError,
    PoisonError,
    ProviderError,
    SendResult,
    TransientError,
)
from tidings.providers.email_api import require_content
from tidings.tracking.sendgrid_webhook import load_public_key

# Seconds before retrying after a credentials error (configuration, fixed by an operator).
CREDENTIALS_RETRY_AFTER = 300.0
# Headers SendGrid refuses in ``headers`` (it sets them itself).
_RESERVED = {
    "x-sg-id",
    "x-sg-eid",
    "received",
    "dkim-signature",
    "content-type",
    "content-transfer-encoding",
    "to",
    "from",
    "subject",
    "reply-to",
    "cc",
    "bcc",
}


class SendGridAccount(AccountSettings):
    kind: Literal["sendgrid"] = "sendgrid"
    api_key: SecretStr
    base_url: str = "https://api.sendgrid.com"
    from_email: str
    from_name: str | None = None
    # The Event Webhook's verification key (base64 DER SubjectPublicKeyInfo, as SendGrid's
    # settings show it). Unset: tidings refuses this account's webhooks (never unsigned).
    event_webhook_public_key: str | None = None

    @field_validator("event_webhook_public_key")
    @classmethod
    def _key_loads(cls, value: str | None) -> str | None:
        if value is not None:
            load_public_key(value)  # refuse a bad key at start-up, not at the first webhook
        return value


class SendGridProvider:
    def __init__(
        self,
        name: str,
        account: SendGridAccount,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.name = name
        self.account = account
        self._clock = clock
        self._client = pooled_client(
            account.max_in_flight,
            base_url=account.base_url.rstrip("/"),
            timeout=account.timeout,
            headers={"Authorization": f"Bearer {account.api_key.get_secret_value()}"},
        )

    async def send(self, message: Message) -> SendResult:
        body = mail_send_body(message, self.account)
        try:
            response = await self._client.post("/v3/mail/send", json=body)
        except httpx.TransportError as error:  # connect, read, timeouts
            raise no_answer("SendGrid", error) from error
        if response.is_success:
            return SendResult(self.name, response.headers.get("X-Message-Id"))
        raise self._classify(response)

    async def close(self) -> None:
        await self._client.aclose()

    def _classify(self, response: httpx.Response) -> ProviderError:
        status = response.status_code
        detail = f"SendGrid {status}: {_error_messages(response)}"
        if status in (401, 403):
            return TransientError(detail, retry_after=CREDENTIALS_RETRY_AFTER, reason="credentials")
        if status == 413:
            return PoisonError(detail, reason="payload_too_large")
        if status == 429:
            retry_after = retry_after_seconds(response.headers, self._clock())
            return TransientError(detail, retry_after=retry_after, reason="rate_limited")
        if status >= 500:
            # X-RateLimit-Reset is on every answer and says nothing about an outage: only a
            # Retry-After is the server's word; without one the retry policy's backoff waits.
            retry_after = parse_retry_after(response.headers.get("Retry-After"), self._clock())
            return TransientError(detail, retry_after=retry_after, reason=f"http_{status}")
        if status == 408:
            return TransientError(detail, reason="http_408")
        return PermanentError(detail, reason="bad_request" if status == 400 else f"http_{status}")


def mail_send_body(message: Message, account: SendGridAccount) -> dict[str, Any]:
    """The v3 mail/send request body for one delivery."""
    content = message.content
    require_content(content)  # SendGrid refuses these (400): they would only fail there
    parts = [{"type": "text/plain", "value": content.text}] if content.text else []
    if content.html:
        parts.append({"type": "text/html", "value": content.html})
    body: dict[str, Any] = {
        "personalizations": [_personalization(message)],
        "from": _sender(message, account),
        "subject": content.subject,
        "content": parts,
        "categories": [message.type],
    }
    headers = {k: v for k, v in message.headers.items() if k.lower() not in _RESERVED}
    if headers:
        body["headers"] = headers
    if message.reply_to:
        body["reply_to"] = {"email": message.reply_to}
    return body


def _sender(message: Message, account: SendGridAccount) -> dict[str, str]:
    """The type's sender if it has one (a verified sender in SendGrid), else the account's."""
    if message.sender is not None:
        address, name = message.sender.address, message.sender.name
    else:
        address, name = account.from_email, account.from_name
    return {"email": address, "name": name} if name else {"email": address}


def _personalization(message: Message) -> dict[str, Any]:
    """One recipient, with copies: SendGrid refuses an address twice in one personalization
    (to, cc and bcc together, ignoring case), so repeats are dropped."""
    seen = {message.address.lower()}
    personalization: dict[str, Any] = {
        "to": [{"email": message.address}],
        "custom_args": {"delivery_id": message.idempotency_key},
    }
    for field_name, copies in (("cc", message.cc), ("bcc", message.bcc)):
        kept = []
        for address in copies:
            if address.lower() not in seen:
                seen.add(address.lower())
                kept.append({"email": address})
        if kept:
            personalization[field_name] = kept
    return personalization


def _error_messages(response: httpx.Response) -> str:
    try:
        errors = response.json().get("errors") or []
        return "; ".join(str(e.get("message")) for e in errors if isinstance(e, dict))
    except (ValueError, AttributeError):
        return response.text[:200]


def retry_after_seconds(headers: Mapping[str, str], now: float) -> float | None:
    """Seconds from Retry-After (seconds or HTTP date), else from X-RateLimit-Reset (epoch).

    ``headers`` must be case-insensitive (httpx.Headers).
    """
    retry_after = parse_retry_after(headers.get("Retry-After"), now)
    if retry_after is not None:
        return retry_after
    reset = headers.get("X-RateLimit-Reset")
    if reset is not None and reset.strip().isdigit():
        return max(0.0, float(reset) - now)
    return None
