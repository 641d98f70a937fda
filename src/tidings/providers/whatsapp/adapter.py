"""WhatsApp: ``POST {base_url}/{version}/{phone_number_id}/messages`` (JSON, ``Bearer`` the
access token).

A business-initiated message must be an approved template: the tidings template of a
``whatsapp`` type names it in ``data.template`` with its ``data.language`` and maps the
notification's variables to its body parameters (``data["1"]``, ``data["2"]``..., each a
rendered Jinja expression). A template without them sends its ``text`` as free text, which
WhatsApp takes only inside the 24-hour customer service window (131047 otherwise): tidings
knows the window from the inbound webhooks and fails free text outside it before calling
(``providers/_whatsapp_window.py``). The
delivery id rides in ``biz_opaque_callback_data``, which Meta echoes in every status
webhook, so a status finds its delivery even when the send's answer was lost.
"""

from __future__ import annotations

from typing import Any

import httpx

from tidings.providers._chat import post_json
from tidings.providers._http import pooled_client
from tidings.providers._whatsapp_window import outside_window
from tidings.providers.base import Message, PoisonError, SendResult
from tidings.providers.whatsapp.account import WhatsAppAccount
from tidings.providers.whatsapp.errors import classify

TEXT_MAX = 4096


class WhatsAppProvider:
    def __init__(self, name: str, account: WhatsAppAccount) -> None:
        self.name = name
        self.account = account
        base = account.base_url.rstrip("/")
        self._url = f"{base}/{account.api_version}/{account.phone_number_id}/messages"
        self._client = pooled_client(account.max_in_flight, timeout=account.timeout)

    async def send(self, message: Message) -> SendResult:
        token = self.account.access_token.get_secret_value()
        auth = {"authorization": f"Bearer {token}"}
        payload = self.payload(message)
        if payload["type"] == "text":
            outside_window(message, self.name)  # before Meta: its 131047 would only cost a call
        response = await post_json(self._client, "whatsapp", self._url, payload, message, auth)
        if response.status_code == 200:
            return SendResult(provider=self.name, provider_msg_id=_message_id(response))
        raise classify(response)

    def payload(self, message: Message) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "messaging_product": "whatsapp",
            "recipient_type": "individual",
            "to": message.address.removeprefix("+"),
            "biz_opaque_callback_data": message.idempotency_key,
        }
        data = message.content.data
        if data.get("template"):
            return payload | {"type": "template", "template": _template(data)}
        text = message.content.text.strip()
        if message.unsubscribe_url:
            text = f"{text}\n\nUnsubscribe: {message.unsubscribe_url}"
        if not text:
            raise PoisonError("a whatsapp template needs data.template or text")
        if len(text) > TEXT_MAX:
            raise PoisonError(f"whatsapp text of {len(text)} characters exceeds {TEXT_MAX}")
        return payload | {"type": "text", "text": {"body": text, "preview_url": False}}

    async def close(self) -> None:
        await self._client.aclose()


def _template(data: dict[str, Any]) -> dict[str, Any]:
    """The approved template, its language and its body parameters in their order."""
    numbers = sorted((int(k), str(v)) for k, v in data.items() if str(k).isdigit())
    template: dict[str, Any] = {
        "name": str(data["template"]),
        "language": {"code": str(data.get("language") or "en_US")},
    }
    if numbers:
        parameters = [{"type": "text", "text": value} for _, value in numbers]
        template["components"] = [{"type": "body", "parameters": parameters}]
    return template


def _message_id(response: httpx.Response) -> str | None:
    try:
        messages = response.json().get("messages") or []
        found = messages[0].get("id")
    except (ValueError, AttributeError, IndexError):
        return None
    return str(found) if found else None
