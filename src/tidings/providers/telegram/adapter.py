"""Telegram: ``POST {base_url}/bot{token}/sendMessage`` (JSON: ``chat_id``, ``text``,
``parse_mode``, ``link_preview_options``). A group that became a supergroup answers 400
with ``parameters.migrate_to_chat_id``: the message is sent there at once, in the same send
(the old id cannot have received it). The provider message id is ``<chat id>:<message
id>`` (message ids count per chat)."""

from __future__ import annotations

from typing import Any

from tidings.providers._chat import post_json
from tidings.providers._http import pooled_client
from tidings.providers.base import Message, PoisonError, SendResult
from tidings.providers.telegram.account import TelegramAccount
from tidings.providers.telegram.errors import classify, migrated_to
from tidings.providers.telegram.text import compose, visible_length

TEXT_MAX = 4096


class TelegramProvider:
    def __init__(self, name: str, account: TelegramAccount) -> None:
        self.name = name
        self.account = account
        token = account.bot_token.get_secret_value()
        self._url = f"{account.base_url.rstrip('/')}/bot{token}/sendMessage"
        self._client = pooled_client(account.max_in_flight, timeout=account.timeout)

    async def send(self, message: Message) -> SendResult:
        payload = self.payload(message)
        answer, status = await self._post(payload, message)
        moved = migrated_to(answer) if status == 400 else None
        if moved is not None:
            answer, status = await self._post(payload | {"chat_id": moved}, message)
        if answer.get("ok") is True and isinstance(answer.get("result"), dict):
            return SendResult(provider=self.name, provider_msg_id=_message_id(answer["result"]))
        raise classify(status, answer)

    def payload(self, message: Message) -> dict[str, Any]:
        text, parse_mode = compose(message, self.account.parse_mode)
        length = visible_length(text, parse_mode)
        if length > TEXT_MAX:
            raise PoisonError(f"telegram message of {length} characters exceeds {TEXT_MAX}")
        payload: dict[str, Any] = {
            "chat_id": message.address,
            "text": text,
            "link_preview_options": {"is_disabled": not self.account.link_previews},
        }
        if parse_mode is not None:
            payload["parse_mode"] = parse_mode
        return payload

    async def _post(self, payload: dict[str, Any], message: Message) -> tuple[dict[str, Any], int]:
        response = await post_json(self._client, "telegram", self._url, payload, message)
        try:
            answer = response.json()
        except ValueError:
            answer = {"description": response.text[:200]}
        return (answer if isinstance(answer, dict) else {}), response.status_code

    async def close(self) -> None:
        await self._client.aclose()


def _message_id(result: dict[str, Any]) -> str | None:
    chat, message_id = result.get("chat"), result.get("message_id")
    chat_id = chat.get("id") if isinstance(chat, dict) else None
    return f"{chat_id}:{message_id}" if chat_id is not None and message_id is not None else None
