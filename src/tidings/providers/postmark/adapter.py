"""The Postmark Email API adapter (httpx).

``POST {base_url}/email`` with ``X-Postmark-Server-Token``; a JSON body per delivery:
``From``, ``To``, ``Cc``/``Bcc``, ``ReplyTo``, ``Subject``, ``TextBody``/``HtmlBody``,
``Headers`` (List-Unsubscribe…), ``Tag`` (the notification type),
``Metadata.tidings_delivery_id`` (echoed in every webhook) and ``MessageStream``, chosen by
the message's category (transactional and reminders go to ``outbound``, marketing to
``broadcast``, unless the account says otherwise). Postmark has no idempotency key.

Errors are HTTP 422 with ``{"ErrorCode", "Message"}`` (Postmark's "API error codes"), a 401
for the token, 413, 429 and 5xx: ``errors.py`` classifies them (docs/providers.md: the
table).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx

from tidings.providers._http import no_answer, pooled_client
from tidings.providers.base import (
    Message,
    SendResult,
)
from tidings.providers.email_api import copies, custom_headers, recipient, require_content, sender
from tidings.providers.postmark.account import PostmarkAccount
from tidings.providers.postmark.errors import classify

TOKEN_HEADER = "X-Postmark-Server-Token"
# The metadata key naming the delivery (Postmark: keys of at most 20 characters).
DELIVERY_METADATA = "tidings_delivery_id"
MAX_TAG = 1000


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


def _message_id(response: httpx.Response) -> str | None:
    try:
        value = response.json().get("MessageID")
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, str) and value else None
