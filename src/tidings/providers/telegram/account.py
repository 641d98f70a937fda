"""A Telegram bot: its token (from @BotFather), how text is formatted, where the Bot API is."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import SecretStr, field_validator

from tidings.providers.accounts import AccountSettings

TOKEN = re.compile(r"[0-9]{1,20}:[A-Za-z0-9_-]{20,100}")


class TelegramAccount(AccountSettings):
    kind: Literal["telegram"] = "telegram"
    bot_token: SecretStr  # <bot id>:<secret>
    # How a template's text is sent: HTML or MarkdownV2 (the text escaped by their rules,
    # the subject in bold), or "none" (plain text). A template's html part is always HTML.
    parse_mode: Literal["HTML", "MarkdownV2", "none"] = "HTML"
    link_previews: bool = False
    base_url: str = "https://api.telegram.org"
    # The Bot API has no idempotency key: a send whose answer was lost is failed, not repeated.
    on_ambiguous: Literal["retry", "fail"] = "fail"

    @field_validator("bot_token")
    @classmethod
    def _token_shape(cls, token: SecretStr) -> SecretStr:
        # It goes into the request path: nothing there but what a token holds.
        if not TOKEN.fullmatch(token.get_secret_value()):
            raise ValueError("bot_token must look like 123456789:AA… (from @BotFather)")
        return token
