"""WhatsApp through Meta's Cloud API: the account (``account.py``), the message, an approved
template or free text (``adapter.py``), the error table (``errors.py``), and the status
webhooks: what a status means (``events.py``) and the receiver, which checks
``X-Hub-Signature-256`` (``receiver.py``). The simulator's side is
``tidings.simulator.whatsapp``."""

from __future__ import annotations

from tidings.providers.whatsapp.account import WhatsAppAccount
from tidings.providers.whatsapp.adapter import WhatsAppProvider
from tidings.providers.whatsapp.receiver import WhatsAppReceiver

__all__ = ["WhatsAppAccount", "WhatsAppProvider", "WhatsAppReceiver"]
