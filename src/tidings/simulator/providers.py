"""Imports every simulated provider module so that each registers itself."""

from __future__ import annotations

# Each module adds its factory to HTTP_PROVIDERS or SERVERS in tidings.simulator.server.
from tidings.simulator import (  # noqa: F401
    apns,
    discord,
    fcm,
    mailgun,
    postmark,
    resend,
    sendgrid,
    slack,
    smtp,
    sparkpost,
    teams,
    telegram,
    twilio,
    vonage,
    webhook,
    webpush,
    whatsapp,
)
from tidings.simulator.ses import api as _ses_api  # noqa: F401
