"""Resend's webhooks: ``POST /v1/webhooks/resend/{account}``.

One event per request, signed by Svix (``signature.py``) with the account's signing
secret; nothing unsigned is ever accepted. Resend retries an event with the same
``svix-id``, which is the event's id for dedupe, so a replay is counted as a duplicate. The
mapping is ``events.py``; the store writes it in one transaction.
"""

from __future__ import annotations

from typing import Any

from tidings.clock import utcnow
from tidings.providers._fields import json_object
from tidings.providers.receivers import Answer, Callback, Refused, counts
from tidings.providers.resend import signature
from tidings.providers.resend.account import ResendAccount
from tidings.providers.resend.events import resend_event
from tidings.store import tracking
from tidings.store.engine import Database


class ResendReceiver:
    kind = "resend"
    title = "Resend"
    account_type = ResendAccount
    hooks = frozenset({""})

    def unconfigured(self, account: ResendAccount) -> Refused | None:
        if account.webhook_secret is not None:
            return None
        return Refused(
            403,
            "webhook_not_configured",
            "signed webhooks must be configured: set webhook_secret on the account "
            "(the webhook's signing secret in Resend, whsec_...)",
        )

    async def verify(self, call: Callback, account: ResendAccount) -> dict[str, Any] | Refused:
        assert account.webhook_secret is not None
        secret = account.webhook_secret.get_secret_value()
        why = signature.refusal(secret, call.body, call.headers, utcnow().timestamp())
        if why is not None:
            return Refused(401, "invalid_signature", f"Resend (Svix) signature refused: {why}")
        event = json_object(call.body)
        if event is None:
            return Refused(400, "invalid_request", "the body must be a JSON object")
        return event

    async def accept(
        self, verified: dict[str, Any], call: Callback, account: ResendAccount, db: Database
    ) -> Answer:
        now = utcnow()
        item = resend_event(verified, signature.message_id(call.headers), now)
        applied = await tracking.apply(db, call.account, "email", [item] if item else [], now)
        return counts(1, applied, ignored=(0 if item else 1) + applied.ignored)
