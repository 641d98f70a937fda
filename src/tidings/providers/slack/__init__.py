"""Slack: the Web API's ``chat.postMessage`` with a bot token, and incoming webhooks, one
account for both (the address says which: a conversation id or a webhook URL). The account
(``account.py``), the adapter and its message (``adapter.py``), the error table
(``errors.py``). Slack reports no delivery status for bot messages: nothing inbound. The
simulator's side is ``tidings.simulator.slack``."""

from __future__ import annotations

from tidings.providers.slack.account import SlackAccount
from tidings.providers.slack.adapter import SlackProvider

__all__ = ["SlackAccount", "SlackProvider"]
