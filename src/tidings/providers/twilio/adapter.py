"""Twilio Programmable Messaging: ``POST /2010-04-01/Accounts/{sid}/Messages.json``.

Form-encoded, HTTP Basic auth with the account SID and auth token. Success is 201 with the
message JSON (its ``sid`` is our provider message id); errors are JSON
``{"code", "message", "more_info", "status"}`` and are classified by ``code``.
"""

from __future__ import annotations

from typing import Any, Literal
from urllib.parse import quote

import httpx
from pydantic import Field, SecretStr, model_validator

from tidings.providers._http import no_answer, pooled_client
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

MAX_BODY_CHARS = 1600
MAX_VALIDITY_SECONDS = 36_000
# A bad account SID or token is our configuration, not the message: retry late (an operator
# rotating the token should not dead-letter the whole queue), bounded by the retry policy.
AUTH_RETRY_SECONDS = 300.0
# Twilio's 429 carries no Retry-After; its guidance is to back off, so we suggest a second.
DEFAULT_THROTTLE_SECONDS = 1.0
# The query parameter of the status callback URL that names the delivery.
DELIVERY_PARAM = "delivery"

# Documented request-time error codes with a side effect on the address.
SUPPRESS_CODES = {
    21211: "invalid_number",
    21610: "unsubscribed_stop",
    21614: "not_mobile",  # a landline: no SMS will ever reach it
}
# Request errors that are about our account/configuration, never about the recipient: a
# wrong From number or a region not enabled would otherwise dead-letter every SMS. Transient
# with a long wait (docs/providers.md: configuration errors), bounded by the retry policy.
CONFIG_CODES = {21408: "region_not_enabled", 21606: "from_not_capable", 21659: "from_invalid"}
CONFIG_RETRY_SECONDS = 300.0


class TwilioAccount(AccountSettings):
    kind: Literal["twilio"] = "twilio"
    account_sid: str = Field(pattern=r"^AC[0-9a-fA-F]{32}$")
    # The account's auth token: it authenticates requests unless an API key is given, and
    # it is what Twilio signs its webhooks with (so callbacks are refused without it).
    auth_token: SecretStr | None = None
    # An API key (SK…) and its secret: Twilio's recommended credentials for requests.
    api_key_sid: str | None = Field(default=None, pattern=r"^SK[0-9a-fA-F]{32}$")
    api_key_secret: SecretStr | None = None
    from_number: str | None = None
    messaging_service_sid: str | None = Field(default=None, pattern=r"^MG[0-9a-fA-F]{32}$")
    base_url: str = "https://api.twilio.com"
    # Where Twilio posts status changes. Unset: {public_url}/v1/webhooks/twilio/{account name}
    # when tidings knows its public URL (the signature covers this exact URL).
    status_callback_url: str | None = None
    # At most once: Twilio has no idempotency key (see AccountSettings.on_ambiguous).
    on_ambiguous: Literal["retry", "fail"] = "fail"

    @model_validator(mode="after")
    def _one_sender(self) -> TwilioAccount:
        return exactly_one(self, "from_number", "messaging_service_sid")

    @model_validator(mode="after")
    def _credentials(self) -> TwilioAccount:
        if (self.api_key_sid is None) != (self.api_key_secret is None):
            raise ValueError("give api_key_sid and api_key_secret together")
        if self.api_key_sid is None and self.auth_token is None:
            raise ValueError("give auth_token, or api_key_sid and api_key_secret")
        return self

    def request_auth(self) -> httpx.BasicAuth:
        """HTTP Basic credentials: the API key if there is one, else SID and auth token."""
        if self.api_key_sid is not None and self.api_key_secret is not None:
            return httpx.BasicAuth(self.api_key_sid, self.api_key_secret.get_secret_value())
        assert self.auth_token is not None
        return httpx.BasicAuth(self.account_sid, self.auth_token.get_secret_value())


class TwilioProvider:
    def __init__(self, name: str, account: TwilioAccount, *, public_url: str | None = None) -> None:
        self.name = name
        self.account = account
        self.status_callback = account.status_callback_url or default_callback(public_url, name)
        self._url = (
            f"{account.base_url.rstrip('/')}/2010-04-01/Accounts/{account.account_sid}"
            "/Messages.json"
        )
        self._client = pooled_client(
            account.max_in_flight, auth=account.request_auth(), timeout=account.timeout
        )

    async def send(self, message: Message) -> SendResult:
        # The Messages API has no idempotency key (the I-Twilio-Idempotency-Token header is
        # one Twilio sends on its webhooks, and ignores on requests): a retry after an answer
        # that never came can send twice, hence the account's on_ambiguous.
        form = self.form(message)
        try:
            response = await self._client.post(self._url, data=form)
        except httpx.TransportError as error:
            raise no_answer("twilio", error) from error
        if response.status_code in (200, 201):
            return SendResult(provider=self.name, provider_msg_id=_sid(response))
        raise classify(response)

    def form(self, message: Message) -> dict[str, str]:
        """The form fields of the request; PoisonError when the body cannot be sent."""
        body = message.content.text
        if not body:
            raise PoisonError("empty SMS body")
        if len(body) > MAX_BODY_CHARS:
            raise PoisonError(f"SMS body of {len(body)} characters exceeds {MAX_BODY_CHARS}")
        form = {"To": message.address, "Body": body}
        if self.account.messaging_service_sid is not None:
            form["MessagingServiceSid"] = self.account.messaging_service_sid
        else:
            assert self.account.from_number is not None
            form["From"] = self.account.from_number
        if self.status_callback:
            # The delivery id rides in the callback URL (which the signature covers): a
            # callback finds its delivery even when the send's answer, and so the SID, was lost.
            form["StatusCallback"] = with_delivery(self.status_callback, message.idempotency_key)
        if message.ttl_seconds is not None:
            validity = min(max(message.ttl_seconds, 1), MAX_VALIDITY_SECONDS)
            form["ValidityPeriod"] = str(validity)
        return form

    async def close(self) -> None:
        await self._client.aclose()


def default_callback(public_url: str | None, name: str) -> str | None:
    """tidings' status callback route for account ``name`` (see tidings.api.routes.webhooks)."""
    if not public_url:
        return None
    return f"{public_url.rstrip('/')}/v1/webhooks/twilio/{quote(name, safe='')}"


def with_delivery(url: str, delivery_id: str) -> str:
    """``url`` with ``delivery=<id>`` added to its query."""
    return f"{url}{'&' if '?' in url else '?'}{DELIVERY_PARAM}={delivery_id}"


def classify(response: httpx.Response) -> ProviderError:
    """The error for a non-2xx answer, by Twilio error code first, then by HTTP status."""
    status = response.status_code
    code, text = _error_body(response)
    described = f"twilio {status} {code}: {text}"
    if code in SUPPRESS_CODES:
        return PermanentError(
            described, effect=Effect.SUPPRESS_ADDRESS, reason=SUPPRESS_CODES[code]
        )
    if code in CONFIG_CODES or status == 403:
        reason = CONFIG_CODES.get(code or 0, "forbidden")
        return TransientError(described, retry_after=CONFIG_RETRY_SECONDS, reason=reason)
    if status == 429 or code == 20429:
        retry = parse_retry_after(response.headers.get("retry-after"))
        return TransientError(
            described, retry_after=retry or DEFAULT_THROTTLE_SECONDS, reason="rate_limited"
        )
    if status == 401 or code == 20003:
        return TransientError(described, retry_after=AUTH_RETRY_SECONDS, reason="auth_failed")
    if status >= 500:
        retry = parse_retry_after(response.headers.get("retry-after"))
        return TransientError(described, retry_after=retry)
    return PermanentError(described, reason=f"twilio_{code}" if code else None)


def _sid(response: httpx.Response) -> str | None:
    """The message SID; None if the body is unreadable (the message was accepted anyway)."""
    try:
        sid = response.json().get("sid")
    except (ValueError, AttributeError):
        return None
    return str(sid) if sid else None


def _error_body(response: httpx.Response) -> tuple[int | None, str]:
    try:
        body: Any = response.json()
    except ValueError:
        return None, response.text[:200]
    if not isinstance(body, dict):
        return None, str(body)[:200]
    code = body.get("code")
    return (code if isinstance(code, int) else None), str(body.get("message", ""))[:200]
