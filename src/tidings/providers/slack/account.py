"""A Slack account: the bot token (``xoxb-``) that posts with ``chat.postMessage``, and
where the Web API and the incoming webhooks are (Slack's own hosts unless told otherwise)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr

from tidings.providers.accounts import AccountSettings


class SlackAccount(AccountSettings):
    kind: Literal["slack"] = "slack"
    # Posts to conversation and user ids (scope chat:write; chat:write.public for public
    # channels the bot is not in). None: only incoming webhook addresses can be sent to.
    bot_token: SecretStr | None = None
    base_url: str = "https://slack.com/api"
    # Replaces https://hooks.slack.com of webhook addresses (the simulator, a proxy).
    webhooks_base_url: str | None = None
    # Slack has no idempotency key: a post whose answer was lost is failed, not repeated.
    on_ambiguous: Literal["retry", "fail"] = "fail"
    # Links and media in the text are not unfurled into previews.
    unfurl: bool = False
    timeout: float = Field(default=10.0, gt=0, le=300)
