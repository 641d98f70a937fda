"""Simulated Resend: its email API with idempotency keys (``api.py``, ``idempotency.py``)
and the Svix-signed webhooks it posts (``events.py``); the mirror of
``tidings.providers.resend``, importing nothing of it."""

from __future__ import annotations

from tidings.simulator.resend.api import ResendSimulator

__all__ = ["ResendSimulator"]
