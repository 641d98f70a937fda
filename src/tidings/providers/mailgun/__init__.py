"""Mailgun email: the account (``account.py``), the adapter (``adapter.py``), its error
table (``errors.py``) and its webhooks: the authentication (``signature.py``), what each
event means (``events.py``) and the receiver (``receiver.py``). The simulator's side is
``tidings.simulator.mailgun``."""

from __future__ import annotations

from tidings.providers.mailgun.account import MailgunAccount
from tidings.providers.mailgun.adapter import MailgunProvider
from tidings.providers.mailgun.receiver import MailgunReceiver

__all__ = ["MailgunAccount", "MailgunProvider", "MailgunReceiver"]
