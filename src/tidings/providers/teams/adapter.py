"""Teams: ``POST`` the workflow's URL (as given, its ``sig`` included) with a message
holding one Adaptive Card: the subject a bold heading, the text wrapped text blocks. The
trigger answers 202 Accepted and runs the workflow later; its run id
(``x-ms-workflow-run-id``) is the provider message id. A card over 28 KB is refused by
Teams, so it is poison here.
"""

from __future__ import annotations

import json
from typing import Any

from tidings.providers._chat import body, chunks, post_json, title
from tidings.providers._http import pooled_client
from tidings.providers.base import Message, PoisonError, SendResult
from tidings.providers.chat_addresses import at_origin
from tidings.providers.teams.account import TeamsAccount
from tidings.providers.teams.errors import classify

CARD_MAX_BYTES = 28 * 1024
BLOCK_CHARS = 4000  # a text block's words, split at a line where one is near
CARD_TYPE = "application/vnd.microsoft.card.adaptive"
SCHEMA = "http://adaptivecards.io/schemas/adaptive-card.json"


class TeamsProvider:
    def __init__(self, name: str, account: TeamsAccount) -> None:
        self.name = name
        self.account = account
        self._client = pooled_client(account.max_in_flight, timeout=account.timeout)

    async def send(self, message: Message) -> SendResult:
        url = at_origin(message.address, self.account.base_url)
        response = await post_json(self._client, "teams", url, self.payload(message), message)
        if response.status_code in (200, 202):
            run = response.headers.get("x-ms-workflow-run-id")
            return SendResult(provider=self.name, provider_msg_id=run or message.idempotency_key)
        raise classify(response)

    def payload(self, message: Message) -> dict[str, Any]:
        heading, text = title(message), body(message)
        blocks = [_text_block(piece) for piece in chunks(text, BLOCK_CHARS)]
        if heading:
            blocks.insert(0, _text_block(heading) | {"weight": "Bolder", "size": "Medium"})
        card = {
            "$schema": SCHEMA,
            "type": "AdaptiveCard",
            "version": self.account.card_version,
            "body": blocks,
        }
        payload = {
            "type": "message",
            "attachments": [{"contentType": CARD_TYPE, "contentUrl": None, "content": card}],
        }
        size = len(json.dumps(payload, ensure_ascii=False).encode())
        if size > CARD_MAX_BYTES:
            raise PoisonError(f"teams card of {size} bytes exceeds {CARD_MAX_BYTES}")
        return payload

    async def close(self) -> None:
        await self._client.aclose()


def _text_block(text: str) -> dict[str, Any]:
    return {"type": "TextBlock", "text": text, "wrap": True}
