"""Simulated Postmark: its email API (``api.py``) and the webhooks it posts (``events.py``);
the mirror of ``tidings.providers.postmark``, importing nothing of it."""

from __future__ import annotations

from tidings.simulator.postmark.api import PostmarkSimulator

__all__ = ["PostmarkSimulator"]
