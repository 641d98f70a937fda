"""SendGrid's Event Webhook: ``POST /v1/webhooks/sendgrid/{account}``.

A JSON array of events, signed with ECDSA (``signature.py``: the account's verification key
over a +-5 minute timestamp and the body). Nothing unsigned is ever accepted. What each
event means is ``events.py``; the store writes them in one transaction.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from tidings.clock import utcnow
from tidings.providers.receivers import Answer, Callback, Refused, counts
from tidings.providers.sendgrid.account import SendGridAccount
from tidings.providers.sendgrid.events import sendgrid_event
from tidings.providers.sendgrid.signature import EventWebhookVerifier
from tidings.store import tracking
from tidings.store.engine import Database


@functools.lru_cache(maxsize=32)
def _verifier(public_key: str) -> EventWebhookVerifier:
    """Parsing the key costs more than verifying; settings may change, so cache by key."""
    return EventWebhookVerifier(public_key)


class SendGridReceiver:
    kind = "sendgrid"
    title = "SendGrid"
    account_type = SendGridAccount
    hooks = frozenset({""})

    def unconfigured(self, account: SendGridAccount) -> Refused | None:
        if account.event_webhook_public_key:
            return None
        return Refused(
            403,
            "webhook_not_configured",
            "signed webhooks must be configured: set event_webhook_public_key on the account "
            "(SendGrid's signed Event Webhook verification key)",
        )

    async def verify(
        self, call: Callback, account: SendGridAccount
    ) -> list[dict[str, Any]] | Refused:
        """The events of a body signed with the account's key, fresh."""
        assert account.event_webhook_public_key
        if not _verifier(account.event_webhook_public_key).verify_headers(call.body, call.headers):
            return Refused(401, "invalid_signature", "bad or stale Event Webhook signature")
        events = _json_events(call.body)
        if events is None:
            return Refused(400, "invalid_request", "the body must be a JSON array of events")
        return events

    async def accept(
        self,
        verified: list[dict[str, Any]],
        call: Callback,
        account: SendGridAccount,
        db: Database,
    ) -> Answer:
        now = utcnow()
        tracked = [item for event in verified if (item := sendgrid_event(event, now))]
        applied = await tracking.apply(db, call.account, "email", tracked, now)
        received = len(verified)
        return counts(received, applied, ignored=received - len(tracked) + applied.ignored)


def _json_events(body: bytes) -> list[dict[str, Any]] | None:
    try:
        events = json.loads(body)
    except ValueError:
        return None
    if not isinstance(events, list) or not all(isinstance(e, dict) for e in events):
        return None
    return events
