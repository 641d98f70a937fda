"""Twilio Programmable Messaging: ``POST /2010-04-01/Accounts/{sid}/Messages.json``.

Form-encoded, HTTP Basic auth with the account SID and auth token. Success is 201 with the
message JSON (its ``sid`` is our provider message id); errors are JSON
``{"code", "message", "more_info", "status"}``, classified by ``errors.py``.
"""

from __future__ import annotations

from urllib.parse import quote

import httpx

from tidings.providers._http import no_answer, pooled_client
from tidings.providers._twilio import with_delivery
from tidings.providers.base import (
    Message,
    PoisonError,
    SendResult,
)
from tidings.providers.twilio.account import TwilioAccount
from tidings.providers.twilio.errors import classify

MAX_BODY_CHARS = 1600
MAX_VALIDITY_SECONDS = 36_000


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


def _sid(response: httpx.Response) -> str | None:
    """The message SID; None if the body is unreadable (the message was accepted anyway)."""
    try:
        sid = response.json().get("sid")
    except (ValueError, AttributeError):
        return None
    return str(sid) if sid else None
