"""Postmark's webhooks: ``POST /v1/webhooks/postmark/{account}``.

One record each (Delivery, Bounce, SpamComplaint, SubscriptionChange, Open, Click).
Postmark does not sign: its webhook URL carries HTTP Basic credentials, which must be the
account's (``signature.py``). Nothing unauthenticated is ever accepted. The mapping is
``events.py``; the store writes it in one transaction.
"""

from __future__ import annotations

from typing import Any

from tidings.clock import utcnow
from tidings.providers._fields import json_object
from tidings.providers.postmark import signature
from tidings.providers.postmark.account import PostmarkAccount
from tidings.providers.postmark.events import postmark_event
from tidings.providers.receivers import Answer, Callback, Refused, counts
from tidings.store import tracking
from tidings.store.engine import Database


class PostmarkReceiver:
    kind = "postmark"
    title = "Postmark"
    account_type = PostmarkAccount
    hooks = frozenset({""})

    def unconfigured(self, account: PostmarkAccount) -> Refused | None:
        if account.webhook_username is not None and account.webhook_password is not None:
            return None
        return Refused(
            403,
            "webhook_not_configured",
            "Postmark webhooks must carry credentials: set webhook_username and "
            "webhook_password on the account, and put them in the webhook URL at Postmark",
        )

    async def verify(self, call: Callback, account: PostmarkAccount) -> dict[str, Any] | Refused:
        """The record of a request carrying the account's Basic credentials."""
        assert account.webhook_username is not None and account.webhook_password is not None
        password = account.webhook_password.get_secret_value()
        if not signature.matches(
            call.headers.get("authorization"), account.webhook_username, password
        ):
            return Refused(
                401,
                "invalid_credentials",
                "missing or wrong Basic credentials",
                headers={"WWW-Authenticate": 'Basic realm="tidings webhooks"'},
            )
        record = json_object(call.body)
        if record is None:
            return Refused(400, "invalid_request", "the body must be a JSON object")
        return record

    async def accept(
        self, verified: dict[str, Any], call: Callback, account: PostmarkAccount, db: Database
    ) -> Answer:
        now = utcnow()
        item = postmark_event(verified, now)
        applied = await tracking.apply(db, call.account, "email", [item] if item else [], now)
        return counts(1, applied, ignored=(0 if item else 1) + applied.ignored)
