"""The SparkPost Transmissions adapter (httpx).

``POST {base_url}/api/v1/transmissions`` with ``Authorization: <api key>`` (no scheme, as
SparkPost wants it); one transmission per delivery: ``recipients`` (the address, with
``metadata.tidings_delivery_id``, echoed as ``rcpt_meta`` in every event; Cc and Bcc as
recipients whose ``header_to`` is the address), ``content`` (``from``, ``subject``,
``text``/``html``, ``reply_to``, ``headers``), ``campaign_id`` (the notification type) and
``options.transactional`` (all but marketing: SparkPost's unsubscribe suppressions then
leave them be). 200 is accepted: ``results.id`` is the transmission id.

SparkPost documents no idempotency key for transmissions: a request repeated after a lost
answer is a second transmission, a second email. The delivery id in the recipient's
metadata lets its events (and the simulator) name a repeat, not prevent one; an account
that must never send twice sets ``on_ambiguous = "fail"`` (docs/providers.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx

from tidings.providers._http import no_answer, pooled_client
from tidings.providers.base import Message, SendResult
from tidings.providers.email_api import copies, custom_headers, recipient, require_content, sender
from tidings.providers.sparkpost.account import SparkPostAccount
from tidings.providers.sparkpost.errors import classify

DELIVERY_METADATA = "tidings_delivery_id"
MAX_CAMPAIGN_ID = 64  # SparkPost: campaign_id of at most 64 bytes


class SparkPostProvider:
    def __init__(
        self, name: str, account: SparkPostAccount, *, clock: Callable[[], float] = time.time
    ) -> None:
        self.name = name
        self.account = account
        self._clock = clock
        self._client = pooled_client(
            account.max_in_flight,
            base_url=account.base_url.rstrip("/"),
            timeout=account.timeout,
            headers={
                "Authorization": account.api_key.get_secret_value(),
                "Accept": "application/json",
            },
        )

    async def send(self, message: Message) -> SendResult:
        body = transmission(message, self.account)
        try:
            response = await self._client.post("/api/v1/transmissions", json=body)
        except httpx.TransportError as error:  # connect, read, timeouts
            raise no_answer("SparkPost", error) from error
        if response.status_code == 200:
            return SendResult(self.name, _transmission_id(response))
        raise classify(response, self._clock())

    async def close(self) -> None:
        await self._client.aclose()


def transmission(message: Message, account: SparkPostAccount) -> dict[str, Any]:
    """The JSON body of one delivery's transmission."""
    content = message.content
    require_content(content)  # SparkPost refuses inline content without a subject
    to = recipient(message.address)
    cc, bcc = copies(message)
    metadata = {DELIVERY_METADATA: message.idempotency_key}
    recipients = [{"address": {"email": to}, "metadata": metadata}]
    recipients += [
        {"address": {"email": a, "header_to": to}, "metadata": metadata} for a in cc + bcc
    ]
    body_content: dict[str, Any] = {
        "from": sender(message, account.from_email, account.from_name),
        "subject": content.subject,
    }
    if content.text:
        body_content["text"] = content.text
    if content.html:
        body_content["html"] = content.html
    if message.reply_to:
        body_content["reply_to"] = message.reply_to
    headers = dict(custom_headers(message.headers))
    if cc:
        headers["CC"] = ", ".join(cc)
    if headers:
        body_content["headers"] = headers
    return {
        "options": {"transactional": message.category != "marketing"},
        "campaign_id": message.type.encode()[:MAX_CAMPAIGN_ID].decode(errors="ignore"),
        "recipients": recipients,
        "content": body_content,
    }


def _transmission_id(response: httpx.Response) -> str | None:
    try:
        value = response.json()["results"]["id"]
    except (ValueError, KeyError, TypeError):
        return None
    return str(value) if value else None
