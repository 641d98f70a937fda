"""Resend email: the account (``account.py``), the adapter (``adapter.py``, which sends the
delivery id as Resend's ``Idempotency-Key``), its error table (``errors.py``) and its
webhooks: Svix signatures (``signature.py``), what each event means (``events.py``) and the
receiver (``receiver.py``). The simulator's side is ``tidings.simulator.resend``."""

from __future__ import annotations

from tidings.providers.resend.account import ResendAccount
from tidings.providers.resend.adapter import ResendProvider
from tidings.providers.resend.receiver import ResendReceiver

__all__ = ["ResendAccount", "ResendProvider", "ResendReceiver"]
