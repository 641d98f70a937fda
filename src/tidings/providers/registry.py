"""The receivers of provider callbacks, by the URL's ``{kind}``: a provider with an inbound
side adds its receiver here, one line (``api/routes/callbacks.py`` routes to it)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tidings.providers.mailgun import MailgunReceiver
from tidings.providers.postmark import PostmarkReceiver
from tidings.providers.receivers import WebhookReceiver
from tidings.providers.resend import ResendReceiver
from tidings.providers.sendgrid import SendGridReceiver
from tidings.providers.ses import SesReceiver
from tidings.providers.sparkpost import SparkPostReceiver
from tidings.providers.twilio import TwilioReceiver
from tidings.providers.twilio_whatsapp import TwilioWhatsAppReceiver
from tidings.providers.vonage import VonageReceiver
from tidings.providers.whatsapp import WhatsAppReceiver

_RECEIVERS: tuple[WebhookReceiver[Any, Any], ...] = (
    SendGridReceiver(),
    MailgunReceiver(),
    PostmarkReceiver(),
    ResendReceiver(),
    SparkPostReceiver(),
    SesReceiver(),
    TwilioReceiver(),
    VonageReceiver(),
    WhatsAppReceiver(),
    TwilioWhatsAppReceiver(),
)
RECEIVERS: Mapping[str, WebhookReceiver[Any, Any]] = {r.kind: r for r in _RECEIVERS}
