"""Vonage message status callbacks: ``POST /v1/webhooks/vonage/{account}``.

``account`` names a Vonage account in the settings; its ``signature_secret`` verifies the
request (``signature.py``: an HS256 JWT whose ``payload_hash`` is the body's SHA-256,
issued within five minutes). Nothing unsigned is accepted. The mapping is ``events.py``;
the store writes it in one transaction.
"""

from __future__ import annotations

import time
from typing import Any

from tidings.clock import utcnow
from tidings.providers._fields import json_object
from tidings.providers.receivers import Answer, Callback, Refused, counts
from tidings.providers.vonage.account import VonageAccount
from tidings.providers.vonage.events import vonage_status
from tidings.providers.vonage.signature import verify
from tidings.store import tracking
from tidings.store.engine import Database


class VonageReceiver:
    kind = "vonage"
    title = "Vonage"
    account_type = VonageAccount
    hooks = frozenset({""})

    def unconfigured(self, account: VonageAccount) -> Refused | None:
        if account.signature_secret is not None:
            return None
        return Refused(
            403,
            "webhook_not_configured",
            "signed webhooks must be configured: set signature_secret on the account "
            "(the signature secret of the Vonage API key)",
        )

    async def verify(self, call: Callback, account: VonageAccount) -> dict[str, Any] | Refused:
        """The status event of a fresh request signed with the account's secret."""
        assert account.signature_secret is not None
        secret = account.signature_secret.get_secret_value()
        if not verify(secret, call.headers.get("authorization"), call.body, time.time()):
            return Refused(401, "invalid_signature", "bad or stale Vonage webhook signature")
        event = json_object(call.body)
        if event is None:
            return Refused(400, "invalid_request", "the body must be a JSON object")
        return event

    async def accept(
        self, verified: dict[str, Any], call: Callback, account: VonageAccount, db: Database
    ) -> Answer:
        now = utcnow()
        item = vonage_status(verified, now)
        applied = await tracking.apply(db, call.account, "sms", [item] if item else [], now)
        return counts(1, applied, ignored=(0 if item else 1) + applied.ignored)
