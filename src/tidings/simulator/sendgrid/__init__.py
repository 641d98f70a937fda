"""Simulated SendGrid: Mail Send (``api.py``) and the signed Event Webhook it posts
(``events.py``); the mirror of ``tidings.providers.sendgrid``, importing nothing of it."""

from __future__ import annotations

from tidings.simulator.sendgrid.api import SendGridSimulator

__all__ = ["SendGridSimulator"]
