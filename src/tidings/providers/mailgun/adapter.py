"""The Mailgun Messages API adapter (httpx).

``POST {base_url}/v3/{domain}/messages``, form-encoded, HTTP Basic ``api:<key>``; one
message per delivery. The delivery id goes as the custom variable ``v:tidings_delivery_id``
(Mailgun echoes it in every webhook event's ``user-variables``); headers such as
List-Unsubscribe go as ``h:<name>``, the reply-to as ``h:Reply-To``, copies as ``cc`` and
``bcc``. Mailgun has no idempotency key.

200 is accepted (``id``, without its angle brackets, is the provider message id: webhook
events carry it that way in ``message.headers.message-id``); other answers are classified
by ``errors.py``; network errors are transient (``no_answer``). An email without a subject
or body is poison before any request (Mailgun refuses it).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import httpx

from tidings.providers._http import no_answer, pooled_client
from tidings.providers.base import (
    Message,
    SendResult,
)
from tidings.providers.email_api import copies, custom_headers, recipient, require_content, sender
from tidings.providers.mailgun.account import MailgunAccount
from tidings.providers.mailgun.errors import classify

# The custom variable naming the delivery (``v:`` on the request, ``user-variables`` after).
DELIVERY_VARIABLE = "tidings_delivery_id"
# Mailgun's limit for a tag.
MAX_TAG = 128


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
