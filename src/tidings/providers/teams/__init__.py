"""Microsoft Teams: Workflows (Power Automate) webhooks with an Adaptive Card made from the
template. The retired Office 365 connectors are not supported (their URLs are refused at
the API). The account (``account.py``), the adapter and its card (``adapter.py``), the
error table (``errors.py``). A workflow reports nothing back: nothing inbound. The
simulator's side is ``tidings.simulator.teams``."""

from __future__ import annotations

from tidings.providers.teams.account import TeamsAccount
from tidings.providers.teams.adapter import TeamsProvider

__all__ = ["TeamsAccount", "TeamsProvider"]
