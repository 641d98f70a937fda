"""Twilio's WhatsApp callbacks: ``POST /v1/webhooks/twilio_whatsapp/{account}`` (status
callbacks) and ``/twilio_whatsapp/{account}/inbound`` (users' messages to the sender: set
it as the sender's "A message comes in" webhook). Both are forms signed
``X-Twilio-Signature`` with the account's auth token, checked as for Twilio's SMS
callbacks; nothing unsigned is accepted. A user's message records the 24-hour window of
their number with this account (``store/whatsapp_windows.py``): Twilio's incoming message
has no time of its own, so the window counts from its arrival."""

from __future__ import annotations

from tidings.clock import utcnow
from tidings.providers._twilio import (
    DELIVERY_PARAM,
    INBOUND,
    SETTINGS_HEADER,
    SIGNATURE_HEADER,
    algorithm_from_settings,
    form_fields,
    verify_signature,
)
from tidings.providers.receivers import Answer, Callback, Refused, counts
from tidings.providers.twilio_whatsapp.account import TwilioWhatsAppAccount
from tidings.providers.twilio_whatsapp.adapter import PREFIX
from tidings.providers.twilio_whatsapp.events import status_callback
from tidings.store import tracking, whatsapp_windows
from tidings.store.engine import Database
from tidings.tracking import inbound

CHANNEL = "whatsapp"


class TwilioWhatsAppReceiver:
    kind = "twilio_whatsapp"
    title = "Twilio WhatsApp"
    account_type = TwilioWhatsAppAccount
    hooks = frozenset({"", INBOUND})

    def unconfigured(self, account: TwilioWhatsAppAccount) -> Refused | None:
        if account.auth_token is not None:
            return None
        return Refused(
            403,
            "webhook_not_configured",
            "Twilio signs its webhooks with the account's auth token: set auth_token on the "
            "account to accept them",
        )

    async def verify(
        self, call: Callback, account: TwilioWhatsAppAccount
    ) -> dict[str, str] | Refused:
        form = form_fields(call.body)
        if form is None:
            return Refused(400, "invalid_request", "the body must be a UTF-8 form")
        signature = call.headers.get(SIGNATURE_HEADER)
        algorithm = algorithm_from_settings(call.headers.get(SETTINGS_HEADER))
        assert account.auth_token is not None
        token = account.auth_token.get_secret_value()
        if not verify_signature(token, call.url, form, signature, algorithm):
            return Refused(401, "invalid_signature", "bad X-Twilio-Signature")
        return {name: values[0] for name, values in form.items()}

    async def accept(
        self,
        verified: dict[str, str],
        call: Callback,
        account: TwilioWhatsAppAccount,
        db: Database,
    ) -> Answer:
        now = utcnow()
        if call.hook == INBOUND:
            sender = verified.get("From", "")
            number = sender.removeprefix(PREFIX)
            if sender.startswith(PREFIX) and number[1:].isdigit():
                await whatsapp_windows.record(db, [(call.account, number, now)])
            return Answer(inbound.EMPTY_TWIML, media_type="text/xml")
        item = status_callback(verified, now, call.query.get(DELIVERY_PARAM))
        applied = await tracking.apply(db, call.account, CHANNEL, [item] if item else [], now)
        return counts(1, applied, ignored=(0 if item else 1) + applied.ignored)
