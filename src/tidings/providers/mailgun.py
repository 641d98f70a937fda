"""The Mailgun Messages API adapter (httpx).

``POST {base_url}/v3/{domain}/messages``, form-encoded, HTTP Basic ``api:<key>``; one
message per delivery. The delivery id goes as the custom variable ``v:tidings_delivery_id``
(Mailgun echoes it in every webhook event's ``user-variables``); headers such as
List-Unsubscribe go as ``h:<name>``, the reply-to as ``h:Reply-To``, copies as ``cc`` and
``bcc``. Mailgun has no idempotency key.

Classification: 200 accepted (``id``, without its angle brackets, is the provider message
id: webhook events carry it that way in ``message.headers.message-id``); 400 permanent (a
malformed address is not a bounce: nothing suppressed); 401/403 our key or a domain not
allowed to send, 404 a domain unknown to the account: configuration, transient with a long
retry; 413 poison; 429 transient after Retry-After; 5xx transient; other 4xx permanent;
network errors transient (``no_answer``). An email without a subject or body is poison
before any request (Mailgun refuses it).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Literal
from urllib.parse import quote

import httpx
from pydantic import SecretStr

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

# The custom variable naming the delivery (``v:`` on the request, ``user-variables`` after).
DELIVERY_VARIABLE = "tidings_delivery_id"
# Seconds before retrying after a configuration error (a key, a domain: an operator's fix).
CONFIG_RETRY_AFTER = 300.0
# Mailgun's limit for a tag.
MAX_TAG = 128


class MailgunAccount(AccountSettings):
    kind: Literal["mailgun"] = "mailgun"
    api_key: SecretStr
    # The sending domain, as added in Mailgun (Sending -> Domains).
    domain: str
    from_email: str
    from_name: str | None = None
    # US; https://api.eu.mailgun.net for a domain created in the EU region.
    base_url: str = "https://api.mailgun.net"
    # The HTTP webhook signing key (Mailgun: Sending -> Webhooks). Unset: tidings refuses
    # this account's webhooks (never unsigned).
    webhook_signing_key: SecretStr | None = None


class MailgunProvider:
    def __init__(
        self,
        name: str,
        account: MailgunAccount,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.name = name
        self.account = account
        self._clock = clock
        self._path = f"/v3/{quote(account.domain, safe='')}/messages"
        self._client = pooled_client(
            account.max_in_flight,
            base_url=account.base_url.rstrip("/"),
            timeout=account.timeout,
            auth=httpx.BasicAuth("api", account.api_key.get_secret_value()),
        )

    async def send(self, message: Message) -> SendResult:
        form = message_form(message, self.account)
        try:
            response = await self._client.post(self._path, data=form)
        except httpx.TransportError as error:  # connect, read, timeouts
            raise no_answer("Mailgun", error) from error
        if response.status_code == 200:
            return SendResult(self.name, message_id(response))
        raise classify(response, self._clock())

    async def close(self) -> None:
        await self._client.aclose()


def message_form(message: Message, account: MailgunAccount) -> dict[str, Any]:
    """The form fields of one delivery's request; PoisonError when it cannot be sent."""
    content = message.content
    require_content(content)
    form: dict[str, Any] = {
        "from": sender(message, account.from_email, account.from_name),
        "to": recipient(message.address),
        "subject": content.subject,
        "o:tag": message.type[:MAX_TAG],
        f"v:{DELIVERY_VARIABLE}": message.idempotency_key,
    }
    if content.text:
        form["text"] = content.text
    if content.html:
        form["html"] = content.html
    cc, bcc = copies(message)
    if cc:
        form["cc"] = ", ".join(cc)
    if bcc:
        form["bcc"] = ", ".join(bcc)
    if message.reply_to:
        form["h:Reply-To"] = message.reply_to
    for name, value in custom_headers(message.headers):
        form[f"h:{name}"] = value
    return form


def classify(response: httpx.Response, now: float) -> ProviderError:
    """The error for an answer other than 200, by HTTP status (Mailgun has no error codes)."""
    status = response.status_code
    detail = f"Mailgun {status}: {_error_message(response)}"
    if status in (401, 403):
        return TransientError(detail, retry_after=CONFIG_RETRY_AFTER, reason="credentials")
    if status == 404:
        return TransientError(detail, retry_after=CONFIG_RETRY_AFTER, reason="domain_not_found")
    if status == 413:
        return PoisonError(detail, reason="payload_too_large")
    if status == 429:
        retry_after = parse_retry_after(response.headers.get("Retry-After"), now)
        return TransientError(detail, retry_after=retry_after, reason="rate_limited")
    if status >= 500:
        retry_after = parse_retry_after(response.headers.get("Retry-After"), now)
        return TransientError(detail, retry_after=retry_after, reason=f"http_{status}")
    return PermanentError(detail, reason="bad_request" if status == 400 else f"http_{status}")


def message_id(response: httpx.Response) -> str | None:
    """The ``id`` of the answer without its angle brackets; None if the body is unreadable
    (the message was accepted anyway)."""
    try:
        value = response.json().get("id")
    except (ValueError, AttributeError):
        return None
    if not isinstance(value, str):
        return None
    return value.strip().strip("<>") or None


def _error_message(response: httpx.Response) -> str:
    """Mailgun's ``{"message": …}``, or the text (its 401 is a plain ``Forbidden``)."""
    try:
        body = response.json()
    except ValueError:
        return response.text[:200]
    if isinstance(body, dict) and "message" in body:
        return str(body["message"])[:200]
    return str(body)[:200]
