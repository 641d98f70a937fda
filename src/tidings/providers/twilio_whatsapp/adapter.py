"""WhatsApp through Twilio: ``POST /2010-04-01/Accounts/{sid}/Messages.json`` with
``From: whatsapp:+…`` and ``To: whatsapp:+…``.

A tidings template of a ``whatsapp`` type that names an approved template
(``data.template``, ``data.language``, the parameters ``data["1"]``…) is sent as Twilio's
Content template: ``ContentSid`` (``data.contentSid``, else the account's ``content_sids``
for that template and language) and ``ContentVariables``, the parameters as a JSON object.
A template with ``text`` is free text (``Body``), which WhatsApp takes only inside the
24-hour customer service window: outside it the delivery fails before any request
(``providers/_whatsapp_window.py``). The delivery id rides in the status callback URL.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from tidings.providers._chat import config_error
from tidings.providers._http import no_answer, pooled_client
from tidings.providers._twilio import with_delivery
from tidings.providers._whatsapp_window import outside_window
from tidings.providers.base import Message, PoisonError, SendResult
from tidings.providers.twilio_whatsapp.account import TwilioWhatsAppAccount
from tidings.providers.twilio_whatsapp.errors import classify

PREFIX = "whatsapp:"
MAX_BODY_CHARS = 1600
KIND = "twilio_whatsapp"


class TwilioWhatsAppProvider:
    def __init__(
        self, name: str, account: TwilioWhatsAppAccount, *, public_url: str | None = None
    ) -> None:
        self.name = name
        self.account = account
        self.status_callback = account.status_callback_url or _callback(public_url, name)
        base = account.base_url.rstrip("/")
        self._url = f"{base}/2010-04-01/Accounts/{account.account_sid}/Messages.json"
        self._client = pooled_client(
            account.max_in_flight, auth=account.request_auth(), timeout=account.timeout
        )

    async def send(self, message: Message) -> SendResult:
        form = self.form(message)
        if "Body" in form:
            outside_window(message, self.name)  # before Twilio, whose 63016 comes later
        try:
            response = await self._client.post(self._url, data=form)
        except httpx.TransportError as error:
            raise no_answer(KIND, error) from error
        if response.status_code in (200, 201):
            return SendResult(provider=self.name, provider_msg_id=_sid(response))
        raise classify(response)

    def form(self, message: Message) -> dict[str, str]:
        form = {"To": PREFIX + message.address, "From": PREFIX + self.account.from_number}
        if self.status_callback:
            form["StatusCallback"] = with_delivery(self.status_callback, message.idempotency_key)
        data = message.content.data
        if data.get("template") or data.get("contentSid"):
            return form | self._content(data)
        text = message.content.text.strip()
        if message.unsubscribe_url:
            text = f"{text}\n\nUnsubscribe: {message.unsubscribe_url}"
        if not text:
            raise PoisonError("a whatsapp template needs data.template or text")
        if len(text) > MAX_BODY_CHARS:
            raise PoisonError(f"whatsapp text of {len(text)} characters exceeds {MAX_BODY_CHARS}")
        return form | {"Body": text}

    def _content(self, data: dict[str, Any]) -> dict[str, str]:
        """ContentSid and ContentVariables of an approved template."""
        named = f"{data.get('template')}:{data.get('language') or 'en_US'}"
        sid = data.get("contentSid") or self.account.content_sids.get(named)
        if not sid:
            raise config_error(f"twilio whatsapp: no content_sids entry for {named}", "no_content")
        variables = {str(k): str(v) for k, v in data.items() if str(k).isdigit()}
        form = {"ContentSid": str(sid)}
        if variables:
            form["ContentVariables"] = json.dumps(variables, ensure_ascii=False)
        return form

    async def close(self) -> None:
        await self._client.aclose()


def _callback(public_url: str | None, name: str) -> str | None:
    if not public_url:
        return None
    return f"{public_url.rstrip('/')}/v1/webhooks/{KIND}/{name}"


def _sid(response: httpx.Response) -> str | None:
    try:
        sid = response.json().get("sid")
    except (ValueError, AttributeError):
        return None
    return str(sid) if sid else None
