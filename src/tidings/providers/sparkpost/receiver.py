"""SparkPost's webhooks: ``POST /v1/webhooks/sparkpost/{account}``.

A JSON array of events per request, with the account's Basic credentials or token
(``auth.py``); nothing unauthenticated is ever accepted. SparkPost retries a batch that
was not answered 200, with the same ``event_id``s: a replay is counted as duplicates. The
mapping is ``events.py``; the store writes a batch in one transaction.
"""

from __future__ import annotations

import json
from typing import Any

from tidings.clock import utcnow
from tidings.providers.receivers import Answer, Callback, Refused, counts
from tidings.providers.sparkpost import auth
from tidings.providers.sparkpost.account import SparkPostAccount
from tidings.providers.sparkpost.events import sparkpost_events
from tidings.store import tracking
from tidings.store.engine import Database


class SparkPostReceiver:
    kind = "sparkpost"
    title = "SparkPost"
    account_type = SparkPostAccount
    hooks = frozenset({""})

    def unconfigured(self, account: SparkPostAccount) -> Refused | None:
        if account.webhooks_configured:
            return None
        return Refused(
            403,
            "webhook_not_configured",
            "SparkPost webhooks must carry credentials: set webhook_username and "
            "webhook_password (auth_type basic at SparkPost) or webhook_token (its auth_token)",
        )

    async def verify(self, call: Callback, account: SparkPostAccount) -> list[Any] | Refused:
        if not auth.authentic(call.headers, account):
            return Refused(
                401,
                "invalid_credentials",
                "missing or wrong credentials",
                headers={"WWW-Authenticate": 'Basic realm="tidings webhooks"'},
            )
        try:
            batch = json.loads(call.body)
        except (ValueError, RecursionError):
            batch = None
        if not isinstance(batch, list):
            return Refused(400, "invalid_request", "the body must be a JSON array of events")
        return batch

    async def accept(
        self, verified: list[Any], call: Callback, account: SparkPostAccount, db: Database
    ) -> Answer:
        now = utcnow()
        items, ignored = sparkpost_events(verified, now)
        applied = await tracking.apply(db, call.account, "email", items, now)
        return counts(len(verified), applied, ignored=ignored + applied.ignored)
