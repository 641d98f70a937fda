"""The SendGrid v3 Mail Send adapter (httpx).

``POST {base_url}/v3/mail/send`` with ``Authorization: Bearer <api key>``; one
personalization per delivery, whose ``custom_args.delivery_id`` comes back in Event Webhook
events. SendGrid has no idempotency key; the delivery id is the custom arg that lets events
(and the simulator) recognise a repeated send.

202 is accepted (``X-Message-Id``); other answers are classified by ``errors.py``; network
errors are transient. An email without a subject is poison before any request (SendGrid
refuses it).
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
from tidings.providers.email_api import require_content
from tidings.providers.sendgrid.account import SendGridAccount
from tidings.providers.sendgrid.errors import classify

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
        raise classify(response, self._clock())

    async def close(self) -> None:
        await self._client.aclose()


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
