"""Discord: webhooks (Execute Webhook) with an embed made from the template. The account
(``account.py``), the adapter and its message (``adapter.py``), the error table
(``errors.py``). Discord reports nothing back to a webhook's sender: nothing inbound. The
simulator's side is ``tidings.simulator.discord``."""

from __future__ import annotations

from tidings.providers.discord.account import DiscordAccount
from tidings.providers.discord.adapter import DiscordProvider

__all__ = ["DiscordAccount", "DiscordProvider"]
