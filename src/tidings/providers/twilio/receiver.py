"""Twilio's callbacks: ``POST /v1/webhooks/twilio/{account}`` (message status callbacks) and
``/twilio/{account}/inbound`` (replies to the account's number, its messaging webhook).

Both are form-encoded and signed: ``X-Twilio-Signature``, HMAC with the account's auth
token over the URL Twilio called and the form (``signature.py``). Nothing unsigned is ever
accepted. What a status means is ``events.py``; a reply is acted on by
``tidings.tracking.inbound`` (STOP and its synonyms suppress the sender's number, START and
UNSTOP lift that suppression: carrier rules).
"""

from __future__ import annotations

from tidings.clock import utcnow
from tidings.providers._twilio import DELIVERY_PARAM, INBOUND, form_fields
from tidings.providers.receivers import Answer, Callback, Refused, counts
from tidings.providers.twilio.account import TwilioAccount
from tidings.providers.twilio.events import twilio_callback
from tidings.providers.twilio.signature import (
    SETTINGS_HEADER,
    SIGNATURE_HEADER,
    algorithm_from_settings,
    verify_signature,
)
from tidings.store import tracking
from tidings.store.engine import Database
from tidings.tracking import inbound


class TwilioReceiver:
    kind = "twilio"
    title = "Twilio"
    account_type = TwilioAccount
    hooks = frozenset({"", INBOUND})

    def unconfigured(self, account: TwilioAccount) -> Refused | None:
        if account.auth_token is not None:
            return None
        return Refused(
            403,
            "webhook_not_configured",
            "Twilio signs its webhooks with the account's auth token: set auth_token on the "
            "account to accept them",
        )

    async def verify(self, call: Callback, account: TwilioAccount) -> dict[str, str] | Refused:
        """The form of a request Twilio signed for the account."""
        assert account.auth_token is not None
        form = form_fields(call.body)
        if form is None:
            return Refused(400, "invalid_request", "the body must be a UTF-8 form")
        signature = call.headers.get(SIGNATURE_HEADER)
        algorithm = algorithm_from_settings(call.headers.get(SETTINGS_HEADER))
        token = account.auth_token.get_secret_value()
        if not verify_signature(token, call.url, form, signature, algorithm):
            return Refused(401, "invalid_signature", "bad X-Twilio-Signature")
        return {name: values[0] for name, values in form.items()}

    async def accept(
        self, verified: dict[str, str], call: Callback, account: TwilioAccount, db: Database
    ) -> Answer:
        if call.hook == INBOUND:
            # A reply: acted on and acknowledged with empty TwiML (tidings sends no reply).
            await inbound.apply_reply(db, call.account, verified, utcnow())
            return Answer(inbound.EMPTY_TWIML, media_type="text/xml")
        now = utcnow()
        item = twilio_callback(verified, now, call.query.get(DELIVERY_PARAM))
        applied = await tracking.apply(db, call.account, "sms", [item] if item else [], now)
        return counts(1, applied, ignored=(0 if item else 1) + applied.ignored)
