"""The Postmark Email API adapter (httpx).

``POST {base_url}/email`` with ``X-Postmark-Server-Token``; a JSON body per delivery:
``From``, ``To``, ``Cc``/``Bcc``, ``ReplyTo``, ``Subject``, ``TextBody``/``HtmlBody``,
``Headers`` (List-Unsubscribe…), ``Tag`` (the notification type),
``Metadata.tidings_delivery_id`` (echoed in every webhook) and ``MessageStream``, chosen by
the message's category (transactional and reminders go to ``outbound``, marketing to
``broadcast``, unless the account says otherwise). Postmark has no idempotency key.

Errors are HTTP 422 with ``{"ErrorCode", "Message"}`` (Postmark's "API error codes"), a 401
for the token, 413, 429 and 5xx; see ``classify`` and docs/providers.md for the table.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Literal

import httpx
from pydantic import Field, SecretStr, field_validator, model_validator

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
from tidings.providers.email_api import copies, custom_headers, recipient, require_content, sender
from tidings.states import Effect

TOKEN_HEADER = "X-Postmark-Server-Token"
# The metadata key naming the delivery (Postmark: keys of at most 20 characters).
DELIVERY_METADATA = "tidings_delivery_id"
# Seconds before retrying after a configuration error (token, sender signature, account).
CONFIG_RETRY_AFTER = 300.0
# Postmark's default streams: every server has "outbound"; "broadcast" is the usual name of
# the broadcasts stream, which Postmark requires for bulk (marketing) mail.
DEFAULT_STREAMS = {"transactional": "outbound", "reminder": "outbound", "marketing": "broadcast"}
MAX_TAG = 1000

_Kind = Literal["permanent", "transient", "config"]
# Postmark's API error codes (developer docs, API overview, "API error codes") that a send can
# get, as (what it is for us, reason). Unlisted codes are permanent.
ERROR_CODES: dict[int, tuple[_Kind, str]] = {
    10: ("config", "bad_api_token"),
    100: ("transient", "maintenance"),
    300: ("permanent", "invalid_email_request"),
    400: ("config", "sender_signature_not_found"),
    401: ("config", "sender_signature_not_confirmed"),
    402: ("permanent", "invalid_json"),
    403: ("permanent", "incompatible_json"),
    405: ("config", "not_allowed_to_send"),
    409: ("permanent", "json_required"),
    410: ("permanent", "too_many_batch_messages"),
    411: ("permanent", "forbidden_attachment_type"),
    412: ("config", "account_pending"),
    413: ("config", "account_may_not_send"),
    # Listed as "Sender signature query exception": Postmark's side failing, not ours.
    500: ("transient", "postmark_internal"),
}
INACTIVE_RECIPIENT = 406
RATE_LIMITED = 429


class PostmarkAccount(AccountSettings):
    kind: Literal["postmark"] = "postmark"
    server_token: SecretStr
    # A confirmed sender signature, or an address of a verified domain.
    from_email: str
    from_name: str | None = None
    base_url: str = "https://api.postmarkapp.com"
    # Category -> message stream id; categories not given keep DEFAULT_STREAMS.
    message_streams: dict[str, str] = Field(default_factory=lambda: dict(DEFAULT_STREAMS))
    # The Basic auth credentials put in the webhook URL in Postmark (Postmark does not sign
    # its webhooks). Unset: tidings refuses this account's webhooks.
    webhook_username: str | None = None
    webhook_password: SecretStr | None = None

    @field_validator("message_streams")
    @classmethod
    def _over_defaults(cls, streams: dict[str, str]) -> dict[str, str]:
        unknown = set(streams) - set(DEFAULT_STREAMS)
        if unknown:
            raise ValueError(f"message_streams: unknown categories {sorted(unknown)}")
        return DEFAULT_STREAMS | streams

    @model_validator(mode="after")
    def _webhook_credentials_together(self) -> PostmarkAccount:
        if (self.webhook_username is None) != (self.webhook_password is None):
            raise ValueError("give webhook_username and webhook_password together")
        return self

    def stream_for(self, category: str) -> str:
        return self.message_streams.get(category, DEFAULT_STREAMS["transactional"])


class PostmarkProvider:
    def __init__(
        self,
        name: str,
        account: PostmarkAccount,
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
            headers={
                TOKEN_HEADER: account.server_token.get_secret_value(),
                "Accept": "application/json",
            },
        )

    async def send(self, message: Message) -> SendResult:
        body = email_body(message, self.account)
        try:
            response = await self._client.post("/email", json=body)
        except httpx.TransportError as error:  # connect, read, timeouts
            raise no_answer("Postmark", error) from error
        if response.status_code == 200:
            return SendResult(self.name, _message_id(response))
        raise classify(response, self._clock())

    async def close(self) -> None:
        await self._client.aclose()


def email_body(message: Message, account: PostmarkAccount) -> dict[str, Any]:
    """The JSON body of one delivery's ``/email`` request."""
    content = message.content
    # Postmark refuses no body (300: "Provide either email TextBody or HtmlBody or both").
    require_content(content, subject=False)
    body: dict[str, Any] = {
        "From": sender(message, account.from_email, account.from_name),
        "To": recipient(message.address),
        "Subject": content.subject or "",
        "Tag": message.type[:MAX_TAG],
        "Metadata": {DELIVERY_METADATA: message.idempotency_key},
        "MessageStream": account.stream_for(message.category),
    }
    if content.text:
        body["TextBody"] = content.text
    if content.html:
        body["HtmlBody"] = content.html
    cc, bcc = copies(message)
    if cc:
        body["Cc"] = ", ".join(cc)
    if bcc:
        body["Bcc"] = ", ".join(bcc)
    if message.reply_to:
        body["ReplyTo"] = message.reply_to
    headers = [{"Name": name, "Value": value} for name, value in custom_headers(message.headers)]
    if headers:
        body["Headers"] = headers
    return body


def classify(response: httpx.Response, now: float) -> ProviderError:
    """The error for an answer other than 200: by HTTP status for the token, size, rate and
    Postmark's own failures, else by Postmark's ``ErrorCode``."""
    status = response.status_code
    code, text = _error_body(response)
    detail = f"Postmark {status} ErrorCode {code}: {text}"
    if status == 401 or code == 10:
        return TransientError(detail, retry_after=CONFIG_RETRY_AFTER, reason="bad_api_token")
    if status == 413:
        return PoisonError(detail, reason="payload_too_large")
    if status == RATE_LIMITED or code == RATE_LIMITED:
        retry_after = parse_retry_after(response.headers.get("Retry-After"), now)
        return TransientError(detail, retry_after=retry_after, reason="rate_limited")
    if status >= 500:
        retry_after = parse_retry_after(response.headers.get("Retry-After"), now)
        return TransientError(detail, retry_after=retry_after, reason=f"http_{status}")
    if code == INACTIVE_RECIPIENT:
        # Postmark will not mail this address again (a hard bounce, a spam complaint or a
        # manual suppression there): neither will tidings.
        return PermanentError(detail, effect=Effect.SUPPRESS_ADDRESS, reason="inactive_recipient")
    return _by_code(code, status, detail)


def _by_code(code: int | None, status: int, detail: str) -> ProviderError:
    if code is None:
        return PermanentError(detail, reason=f"http_{status}")
    kind, reason = ERROR_CODES.get(code, ("permanent", f"postmark_{code}"))
    if kind == "config":
        return TransientError(detail, retry_after=CONFIG_RETRY_AFTER, reason=reason)
    if kind == "transient":
        return TransientError(detail, reason=reason)
    return PermanentError(detail, reason=reason)


def _message_id(response: httpx.Response) -> str | None:
    try:
        value = response.json().get("MessageID")
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, str) and value else None


def _error_body(response: httpx.Response) -> tuple[int | None, str]:
    try:
        body: Any = response.json()
    except ValueError:
        return None, response.text[:200]
    if not isinstance(body, dict):
        return None, str(body)[:200]
    code = body.get("ErrorCode")
    code = code if isinstance(code, int) and not isinstance(code, bool) else None
    return code, str(body.get("Message", ""))[:200]
