"""Apple Push Notification service (HTTP/2): the account, the adapter and its error table
(``adapter.py``). The simulator's side is ``tidings.simulator.apns``."""

from __future__ import annotations

from tidings.providers.apns.adapter import ApnsAccount, ApnsProvider

__all__ = ["ApnsAccount", "ApnsProvider"]
