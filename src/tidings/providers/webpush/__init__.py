"""Web Push (RFC 8030, VAPID): the account, the adapter and its error table (``adapter.py``),
the subscription (``subscription.py``) and its payload encryption (``crypto.py``). The
simulator's side is ``tidings.simulator.webpush``."""

from __future__ import annotations

from tidings.providers.webpush.adapter import WebPushAccount, WebPushProvider

__all__ = ["WebPushAccount", "WebPushProvider"]
