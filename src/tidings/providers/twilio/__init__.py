"""Twilio SMS (Programmable Messaging): the account (``account.py``), the adapter
(``adapter.py``), its error table (``errors.py``) and its callbacks, status reports and
replies: the signature (``signature.py``), what a status means (``events.py``) and the
receiver (``receiver.py``). The simulator's side is ``tidings.simulator.twilio``."""

from __future__ import annotations

from tidings.providers.twilio.account import TwilioAccount
from tidings.providers.twilio.adapter import TwilioProvider
from tidings.providers.twilio.receiver import TwilioReceiver

__all__ = ["TwilioAccount", "TwilioProvider", "TwilioReceiver"]
