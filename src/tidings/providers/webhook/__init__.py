"""The webhook channel: an outbound adapter POSTing a notification to a URL (``adapter.py``:
the account, the adapter and its error table), signed as Standard Webhooks (``signing.py``,
which producer webhooks use too). Not to be confused with provider callbacks
(``providers/receivers.py``). The simulator's side is ``tidings.simulator.webhook``."""

from __future__ import annotations

from tidings.providers.webhook.adapter import WebhookAccount, WebhookProvider

__all__ = ["WebhookAccount", "WebhookProvider"]
