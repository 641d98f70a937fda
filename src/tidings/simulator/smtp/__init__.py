"""Simulated SMTP: a strict server (``server.py``) that mails delivery status notifications
back (``dsn.py``, ``dsn_mailer.py``); the mirror of ``tidings.providers.smtp``, importing
nothing of it."""

from __future__ import annotations

from tidings.simulator.smtp.server import SmtpServer

__all__ = ["SmtpServer"]
