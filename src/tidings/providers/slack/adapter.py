"""Slack: ``POST {base_url}/chat.postMessage`` (JSON, ``Authorization: Bearer`` the bot
token) for a conversation or user id; ``POST`` the message to the URL for an incoming
webhook. One message for both: Block Kit blocks made from the template (the subject a
header block, the text mrkdwn sections) and the text as the notification's fallback.

Text is escaped as Slack asks (``&``, ``<``, ``>``), so a value in the data cannot ping a
channel (``<!channel>``) nor hide a link; mrkdwn styling (``*bold*``) still works. The
Web API call carries the delivery in its message metadata, which apps can read back.
"""

from __future__ import annotations

from typing import Any

import httpx

from tidings.providers._chat import body, chunks, clipped, config_error, post_json, title
from tidings.providers._http import pooled_client
from tidings.providers.base import Message, PoisonError, SendResult
from tidings.providers.chat_addresses import at_origin, is_slack_webhook
from tidings.providers.slack.account import SlackAccount
from tidings.providers.slack.errors import classify_api, classify_webhook

HEADER_MAX = 150  # a header block's plain_text
SECTION_MAX = 3000  # a section block's text
MAX_BLOCKS = 50
TEXT_MAX = 40_000  # chat.postMessage truncates longer text; we refuse it
METADATA_EVENT = "tidings_delivery"


class SlackProvider:
    def __init__(self, name: str, account: SlackAccount) -> None:
        self.name = name
        self.account = account
        self._api = f"{account.base_url.rstrip('/')}/chat.postMessage"
        self._client = pooled_client(account.max_in_flight, timeout=account.timeout)

    async def send(self, message: Message) -> SendResult:
        if is_slack_webhook(message.address):
            return await self._webhook(message)
        if self.account.bot_token is None:
            raise config_error(
                "slack: this account has no bot_token to post to conversation ids",
                "no_bot_token",
            )
        payload = {"channel": message.address, **self.payload(message)}
        payload["metadata"] = {
            "event_type": METADATA_EVENT,
            "event_payload": {
                "delivery_id": message.idempotency_key,
                "notification_id": str(message.notification_id),
            },
        }
        token = self.account.bot_token.get_secret_value()
        auth = {"authorization": f"Bearer {token}"}
        response = await post_json(self._client, "slack", self._api, payload, message, auth)
        answer = _json(response)
        if response.status_code == 200 and answer.get("ok") is True:
            return SendResult(provider=self.name, provider_msg_id=_message_id(answer))
        raise classify_api(response, str(answer.get("error") or ""))

    async def _webhook(self, message: Message) -> SendResult:
        url = at_origin(message.address, self.account.webhooks_base_url)
        response = await post_json(self._client, "slack", url, self.payload(message), message)
        if response.status_code == 200:
            # A webhook answers "ok" and no message id: the delivery is its own.
            return SendResult(provider=self.name, provider_msg_id=message.idempotency_key)
        raise classify_webhook(response)

    def payload(self, message: Message) -> dict[str, Any]:
        """The message's text and blocks (what both kinds take)."""
        heading, text = title(message), escape(body(message))
        fallback = f"{escape(heading)}\n{text}".strip() if heading else text
        if len(fallback) > TEXT_MAX:
            raise PoisonError(f"slack text of {len(fallback)} characters exceeds {TEXT_MAX}")
        blocks: list[dict[str, Any]] = []
        if heading:
            header = {"type": "plain_text", "text": clipped(heading, HEADER_MAX), "emoji": True}
            blocks.append({"type": "header", "text": header})
        for piece in chunks(text, SECTION_MAX):
            blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": piece}})
        if len(blocks) > MAX_BLOCKS:
            raise PoisonError(f"slack message of {len(blocks)} blocks exceeds {MAX_BLOCKS}")
        unfurl = self.account.unfurl
        return {"text": fallback, "blocks": blocks, "unfurl_links": unfurl, "unfurl_media": unfurl}

    async def close(self) -> None:
        await self._client.aclose()


def escape(text: str) -> str:
    """Slack's three control characters, as its formatting rules ask."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _json(response: httpx.Response) -> dict[str, Any]:
    try:
        answer = response.json()
    except ValueError:
        return {}
    return answer if isinstance(answer, dict) else {}


def _message_id(answer: dict[str, Any]) -> str | None:
    """``<channel>:<ts>``: a Slack message is known by its conversation and timestamp."""
    channel, ts = answer.get("channel"), answer.get("ts")
    return f"{channel}:{ts}" if channel and ts else None
