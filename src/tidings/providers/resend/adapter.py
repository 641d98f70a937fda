"""The Resend email adapter (httpx).

``POST {base_url}/emails`` with ``Authorization: Bearer <api key>`` and
``Idempotency-Key: <delivery id>``; a JSON body per delivery: ``from``, ``to``, ``cc``,
``bcc``, ``reply_to``, ``subject``, ``text``/``html``, ``headers`` (List-Unsubscribe…) and
``tags`` (``tidings_delivery_id``, echoed in every webhook, and the type). 200 is accepted
(``{"id"}``).

Resend keeps an idempotency key 24 hours: a request repeating a key it has answered is
answered the same (the same ``id``) without a second email. So a send retried after its
answer was lost (``on_ambiguous = "retry"``, the default) reaches the user once, within that
window; the delivery's body must be the same on the retry (a changed one is refused, 409
``invalid_idempotent_request``: ``errors.py``).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import httpx

from tidings.providers._http import no_answer, pooled_client
from tidings.providers.base import Message, SendResult
from tidings.providers.email_api import copies, custom_headers, recipient, require_content, sender
from tidings.providers.resend.account import ResendAccount
from tidings.providers.resend.errors import classify

IDEMPOTENCY_HEADER = "Idempotency-Key"
DELIVERY_TAG = "tidings_delivery_id"
TYPE_TAG = "tidings_type"
# Resend's tags: ASCII letters, digits, underscores and dashes, at most 256 characters.
_TAG_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
MAX_TAG = 256


class ResendProvider:
    def __init__(
        self, name: str, account: ResendAccount, *, clock: Callable[[], float] = time.time
    ) -> None:
        self.name = name
        self.account = account
        self._clock = clock
        self._client = pooled_client(
            account.max_in_flight,
            base_url=account.base_url.rstrip("/"),
            timeout=account.timeout,
            headers={
                "Authorization": f"Bearer {account.api_key.get_secret_value()}",
                "Accept": "application/json",
            },
        )

    async def send(self, message: Message) -> SendResult:
        body = email_body(message, self.account)
        headers = {IDEMPOTENCY_HEADER: message.idempotency_key}
        try:
            response = await self._client.post("/emails", json=body, headers=headers)
        except httpx.TransportError as error:  # connect, read, timeouts
            raise no_answer("Resend", error) from error
        if response.status_code == 200:
            return SendResult(self.name, _email_id(response))
        raise classify(response, self._clock())

    async def close(self) -> None:
        await self._client.aclose()


def tag_value(value: str) -> str:
    """``value`` as Resend takes a tag value."""
    return _TAG_UNSAFE.sub("_", value)[:MAX_TAG] or "_"


def email_body(message: Message, account: ResendAccount) -> dict[str, Any]:
    """The JSON body of one delivery's ``/emails`` request: the same on every attempt of
    the delivery (a retry must repeat its first body for the key to be honoured)."""
    content = message.content
    require_content(content)  # Resend requires a subject, and text or HTML
    body: dict[str, Any] = {
        "from": sender(message, account.from_email, account.from_name),
        "to": [recipient(message.address)],
        "subject": content.subject,
        "tags": [
            {"name": DELIVERY_TAG, "value": message.idempotency_key},
            {"name": TYPE_TAG, "value": tag_value(message.type)},
        ],
    }
    if content.text:
        body["text"] = content.text
    if content.html:
        body["html"] = content.html
    cc, bcc = copies(message)
    if cc:
        body["cc"] = cc
    if bcc:
        body["bcc"] = bcc
    if message.reply_to:
        body["reply_to"] = [message.reply_to]
    headers = dict(custom_headers(message.headers))
    if headers:
        body["headers"] = headers
    return body


def _email_id(response: httpx.Response) -> str | None:
    try:
        value = response.json().get("id")
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, str) and value else None
