"""Mailgun's webhooks: ``POST /v1/webhooks/mailgun/{account}``.

``account`` names a Mailgun account in the settings. Mailgun signs each request
(``signature.py``: HMAC of timestamp + token with the account's webhook signing key, five
minutes of tolerance, and a token accepted once: ``tidings.store.webhook_tokens``). The
mapping is ``events.py``; the store writes it in one transaction.

Mailgun retries any answer but 200 and 406 ("rejected, do not retry") for hours: a replayed
token or an unusable event that is correctly signed is answered 406; a bad signature is 401
(a request that did not come from Mailgun has no retry to stop).
"""

from __future__ import annotations

import logging
from typing import Any

from tidings.clock import utcnow
from tidings.providers._fields import json_object
from tidings.providers.mailgun import signature
from tidings.providers.mailgun.account import MailgunAccount
from tidings.providers.mailgun.events import mailgun_event
from tidings.providers.receivers import Answer, Callback, Refused, counts
from tidings.store import tracking, webhook_tokens
from tidings.store.engine import Database

log = logging.getLogger(__name__)
# Mailgun's "rejected: do not retry".
REJECTED = 406


class MailgunReceiver:
    kind = "mailgun"
    title = "Mailgun"
    account_type = MailgunAccount
    hooks = frozenset({""})

    def unconfigured(self, account: MailgunAccount) -> Refused | None:
        if account.webhook_signing_key is not None:
            return None
        return Refused(
            403,
            "webhook_not_configured",
            "signed webhooks must be configured: set webhook_signing_key on the account "
            "(Mailgun's HTTP webhook signing key)",
        )

    async def verify(self, call: Callback, account: MailgunAccount) -> dict[str, Any] | Refused:
        """One Mailgun event (``{"signature", "event-data"}``), signed with the account's key."""
        assert account.webhook_signing_key is not None
        body = json_object(call.body)
        if body is None:
            return Refused(400, "invalid_request", "the body must be a JSON object")
        key = account.webhook_signing_key.get_secret_value()
        why = signature.refusal(key, body.get("signature"), utcnow().timestamp())
        if why is not None:
            return Refused(401, "invalid_signature", f"Mailgun signature refused: {why}")
        return body

    async def accept(
        self, verified: dict[str, Any], call: Callback, account: MailgunAccount, db: Database
    ) -> Answer | Refused:
        data = verified.get("event-data")
        if not isinstance(data, dict):
            return Refused(REJECTED, "invalid_request", "event-data must be a JSON object")
        now = utcnow()
        token = str(verified["signature"]["token"])
        if not await webhook_tokens.first_use(db, call.account, token, now):
            return Refused(REJECTED, "replayed", "this signature was already accepted")
        item = mailgun_event(data, now)
        try:
            applied = await tracking.apply(db, call.account, "email", [item] if item else [], now)
        except Exception:
            await _forget(db, call.account, token)  # so that Mailgun's retry is not a "replay"
            raise
        return counts(1, applied, ignored=(0 if item else 1) + applied.ignored)


async def _forget(db: Database, account: str, token: str) -> None:
    try:
        await webhook_tokens.forget(db, account, token)
    except Exception:  # the database that failed the apply may fail this too
        log.warning("could not release a Mailgun webhook token of %s", account, exc_info=True)
