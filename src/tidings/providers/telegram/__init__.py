"""Telegram: the Bot API's ``sendMessage``. The account (``account.py``), the message and
its escaping per parse mode (``text.py``), the adapter (``adapter.py``), the error table
(``errors.py``). The simulator's side is ``tidings.simulator.telegram``."""

from __future__ import annotations

from tidings.providers.telegram.account import TelegramAccount
from tidings.providers.telegram.adapter import TelegramProvider

__all__ = ["TelegramAccount", "TelegramProvider"]
