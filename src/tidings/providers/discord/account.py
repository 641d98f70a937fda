"""A Discord account: no credentials (each webhook's URL carries its token), the name and
avatar messages show, and where Discord is."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from tidings.providers.accounts import AccountSettings


class DiscordAccount(AccountSettings):
    kind: Literal["discord"] = "discord"
    # Shown as the author instead of the webhook's own name and avatar, when set.
    username: str | None = Field(default=None, min_length=1, max_length=80)
    avatar_url: str | None = Field(default=None, max_length=2048)
    # Replaces https://discord.com of the addresses (the simulator, a proxy).
    base_url: str | None = None
    # Discord has no idempotency key: a post whose answer was lost is failed, not repeated.
    on_ambiguous: Literal["retry", "fail"] = "fail"
