"""SendGrid email (v3 Mail Send): the account (``account.py``), the adapter
(``adapter.py``), its error table (``errors.py``) and its Event Webhook: the signature
(``signature.py``), what each event means (``events.py``) and the receiver
(``receiver.py``). The simulator's side is ``tidings.simulator.sendgrid``."""

from __future__ import annotations

from tidings.providers.sendgrid.account import SendGridAccount
from tidings.providers.sendgrid.adapter import SendGridProvider
from tidings.providers.sendgrid.receiver import SendGridReceiver

__all__ = ["SendGridAccount", "SendGridProvider", "SendGridReceiver"]
