"""Simulated Mailgun: its email API (``api.py``) and the webhooks it posts (``events.py``);
the mirror of ``tidings.providers.mailgun``, importing nothing of it."""

from __future__ import annotations

from tidings.simulator.mailgun.api import MailgunSimulator

__all__ = ["MailgunSimulator"]
