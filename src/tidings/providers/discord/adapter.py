"""Discord: ``POST https://discord.com/api/webhooks/{id}/{token}?wait=true`` (Execute
Webhook), JSON. The message is one embed per 4,096 characters of text (the subject the
first one's title), mentions switched off (``allowed_mentions``), so a value in the data
cannot ping ``@everyone``. ``wait=true`` makes Discord answer with the message, whose id is
the provider message id.
"""

from __future__ import annotations

from typing import Any

import httpx

from tidings.providers._chat import body, chunks, clipped, post_json, title
from tidings.providers._http import pooled_client
from tidings.providers.base import Message, PoisonError, SendResult
from tidings.providers.chat_addresses import at_origin
from tidings.providers.discord.account import DiscordAccount
from tidings.providers.discord.errors import classify

TITLE_MAX = 256
DESCRIPTION_MAX = 4096
EMBEDS_MAX = 10
EMBED_TOTAL_MAX = 6000  # the characters of every embed of one message together


class DiscordProvider:
    def __init__(self, name: str, account: DiscordAccount) -> None:
        self.name = name
        self.account = account
        self._client = pooled_client(account.max_in_flight, timeout=account.timeout)

    async def send(self, message: Message) -> SendResult:
        url = at_origin(message.address, self.account.base_url) + "?wait=true"
        response = await post_json(self._client, "discord", url, self.payload(message), message)
        if response.status_code == 200:
            return SendResult(provider=self.name, provider_msg_id=_message_id(response))
        raise classify(response)

    def payload(self, message: Message) -> dict[str, Any]:
        heading, text = title(message), body(message)
        embeds: list[dict[str, Any]] = [
            {"description": piece} for piece in chunks(text, DESCRIPTION_MAX)
        ] or [{}]
        if heading:
            embeds[0]["title"] = clipped(heading, TITLE_MAX)
        size = sum(len(e.get("title", "")) + len(e.get("description", "")) for e in embeds)
        if len(embeds) > EMBEDS_MAX or size > EMBED_TOTAL_MAX:
            raise PoisonError(f"discord message of {size} characters exceeds {EMBED_TOTAL_MAX}")
        payload: dict[str, Any] = {"embeds": embeds, "allowed_mentions": {"parse": []}}
        if self.account.username:
            payload["username"] = self.account.username
        if self.account.avatar_url:
            payload["avatar_url"] = self.account.avatar_url
        return payload

    async def close(self) -> None:
        await self._client.aclose()


def _message_id(response: httpx.Response) -> str | None:
    try:
        found = response.json().get("id")
    except (ValueError, AttributeError):
        return None
    return str(found) if found else None
