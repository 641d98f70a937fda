"""SparkPost email: the account (``account.py``), the adapter (``adapter.py``), its error
table (``errors.py``) and its webhooks: Basic credentials or a token (``auth.py``), what
each event means (``events.py``) and the receiver (``receiver.py``). The simulator's side
is ``tidings.simulator.sparkpost``."""

from __future__ import annotations

from tidings.providers.sparkpost.account import SparkPostAccount
from tidings.providers.sparkpost.adapter import SparkPostProvider
from tidings.providers.sparkpost.receiver import SparkPostReceiver

__all__ = ["SparkPostAccount", "SparkPostProvider", "SparkPostReceiver"]
