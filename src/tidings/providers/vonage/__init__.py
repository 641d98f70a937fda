"""Vonage SMS (the Messages API): the account (``account.py``, ``auth.py``), the adapter
(``adapter.py``), its error table (``errors.py``) and its status callbacks: the signature
(``signature.py``), what each event means (``events.py``) and the receiver
(``receiver.py``). The simulator's side is ``tidings.simulator.vonage``."""

from __future__ import annotations

from tidings.providers.vonage.account import VonageAccount
from tidings.providers.vonage.adapter import VonageProvider
from tidings.providers.vonage.receiver import VonageReceiver

__all__ = ["VonageAccount", "VonageProvider", "VonageReceiver"]
