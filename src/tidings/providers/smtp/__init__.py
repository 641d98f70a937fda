"""Email over SMTP: the account and the adapter (``adapter.py``), its error table
(``errors.py``: an SMTP reply as a typed error) and DKIM signing (``dkim.py``); bounces come
back as DSNs (``tidings.tracking.bounce_listener``). The simulator's side is
``tidings.simulator.smtp``."""

from __future__ import annotations

from tidings.providers.smtp.adapter import SmtpAccount, SmtpProvider

__all__ = ["SmtpAccount", "SmtpProvider"]
