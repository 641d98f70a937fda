"""WhatsApp through Twilio's Messages API (a WhatsApp sender): the account
(``account.py``), the message, an approved Content template or free text (``adapter.py``),
the error table (``errors.py``), and the callbacks: status reports and users' messages,
signed ``X-Twilio-Signature`` as Twilio's SMS callbacks are (``events.py``,
``receiver.py``). The simulator's side is ``tidings.simulator.twilio.whatsapp``."""

from __future__ import annotations

from tidings.providers.twilio_whatsapp.account import TwilioWhatsAppAccount
from tidings.providers.twilio_whatsapp.adapter import TwilioWhatsAppProvider
from tidings.providers.twilio_whatsapp.receiver import TwilioWhatsAppReceiver

__all__ = ["TwilioWhatsAppAccount", "TwilioWhatsAppProvider", "TwilioWhatsAppReceiver"]
