"""Simulated webhook endpoint: what the webhook channel POSTs to (``receiver.py``); the mirror
of ``tidings.providers.webhook``, importing nothing of it."""

from __future__ import annotations

from tidings.simulator.webhook.receiver import SimulatedWebhookReceiver

__all__ = ["SimulatedWebhookReceiver"]
