"""Vonage SMS through the Messages API: ``POST {base_url}/v1/messages``.

JSON ``{"message_type": "text", "channel": "sms", "to", "from", "text", "client_ref"}``,
authenticated with HTTP Basic (API key and secret) or an application JWT (``auth.py``).
Success is 202 ``{"message_uuid"}``, our provider message id; ``client_ref`` (at most 100
characters) is the delivery id, which every status callback echoes. Errors are classified
by ``errors.py``.
"""

from __future__ import annotations

import httpx

from tidings.providers._http import no_answer, pooled_client
from tidings.providers.base import Message, PoisonError, SendResult
from tidings.providers.vonage.account import VonageAccount
from tidings.providers.vonage.errors import classify

MAX_TEXT_CHARS = 1000  # the Messages API's limit on an SMS text
MAX_CLIENT_REF = 100


class VonageProvider:
    def __init__(self, name: str, account: VonageAccount) -> None:
        self.name = name
        self.account = account
        self._url = f"{account.base_url.rstrip('/')}/v1/messages"
        self._client = pooled_client(
            account.max_in_flight, auth=account.request_auth(), timeout=account.timeout
        )

    async def send(self, message: Message) -> SendResult:
        body = self.body(message)
        try:
            response = await self._client.post(self._url, json=body)
        except httpx.TransportError as error:
            raise no_answer("vonage", error) from error
        if response.status_code in (200, 202):
            return SendResult(provider=self.name, provider_msg_id=_message_uuid(response))
        raise classify(response)

    def body(self, message: Message) -> dict[str, str]:
        """The request's JSON; PoisonError when the text cannot be sent."""
        text = message.content.text
        if not text:
            raise PoisonError("empty SMS text")
        if len(text) > MAX_TEXT_CHARS:
            raise PoisonError(f"SMS text of {len(text)} characters exceeds {MAX_TEXT_CHARS}")
        return {
            "message_type": "text",
            "channel": "sms",
            "to": message.address.removeprefix("+"),
            "from": self.account.sender.removeprefix("+"),
            "text": text,
            "client_ref": message.idempotency_key[:MAX_CLIENT_REF],
        }

    async def close(self) -> None:
        await self._client.aclose()


def _message_uuid(response: httpx.Response) -> str | None:
    """The message UUID; None if the body is unreadable (the message was accepted anyway)."""
    try:
        value = response.json().get("message_uuid")
    except (ValueError, AttributeError):
        return None
    return str(value)[:255] if value else None
