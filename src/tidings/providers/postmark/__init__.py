"""Postmark email: the account (``account.py``), the adapter (``adapter.py``), its error
table (``errors.py``) and its webhooks: the authentication (``signature.py``), what each
event means (``events.py``) and the receiver (``receiver.py``). The simulator's side is
``tidings.simulator.postmark``."""

from __future__ import annotations

from tidings.providers.postmark.account import PostmarkAccount
from tidings.providers.postmark.adapter import PostmarkProvider
from tidings.providers.postmark.receiver import PostmarkReceiver

__all__ = ["PostmarkAccount", "PostmarkProvider", "PostmarkReceiver"]
