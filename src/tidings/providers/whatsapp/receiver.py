"""WhatsApp's status webhooks: ``POST /v1/webhooks/whatsapp/{account}``.

Meta signs each with ``X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the raw body, keyed
with the app secret>``; nothing unsigned is accepted. One request may hold many statuses
(``entry[].changes[].value.statuses[]``); what each means is ``events.py``. Inbound
messages (``value.messages``) record when their number last wrote to the account: the
24-hour customer service window (``store/whatsapp_windows.py``). Meta's verification
handshake (a GET with ``hub.mode=subscribe``, ``hub.verify_token``, ``hub.challenge``) is
answered with the challenge when the token is the account's ``verify_token``.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

from tidings.clock import utcnow
from tidings.providers._fields import json_object
from tidings.providers.receivers import Answer, Callback, Refused, counts
from tidings.providers.whatsapp.account import WhatsAppAccount
from tidings.providers.whatsapp.events import inbound, statuses, whatsapp_status
from tidings.store import tracking, whatsapp_windows
from tidings.store.engine import Database

SIGNATURE_HEADER = "X-Hub-Signature-256"


def signature(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


class WhatsAppReceiver:
    kind = "whatsapp"
    title = "WhatsApp"
    account_type = WhatsAppAccount
    hooks = frozenset({""})

    def unconfigured(self, account: WhatsAppAccount) -> Refused | None:
        if account.app_secret is not None:
            return None
        return Refused(
            403,
            "webhook_not_configured",
            "Meta signs WhatsApp webhooks with the app secret: set app_secret on the account "
            "to accept them",
        )

    async def verify(self, call: Callback, account: WhatsAppAccount) -> dict[str, Any] | Refused:
        assert account.app_secret is not None
        expected = signature(account.app_secret.get_secret_value(), call.body)
        given = call.headers.get(SIGNATURE_HEADER) or ""
        if not hmac.compare_digest(given.encode(), expected.encode()):
            return Refused(401, "invalid_signature", f"bad {SIGNATURE_HEADER}")
        notification = json_object(call.body)
        if notification is None:
            return Refused(400, "invalid_request", "the body must be a JSON object")
        return notification

    async def accept(
        self, verified: dict[str, Any], call: Callback, account: WhatsAppAccount, db: Database
    ) -> Answer:
        now = utcnow()
        written = inbound(verified, now)
        await whatsapp_windows.record(db, [(call.account, n, at) for n, at in written])
        found = list(statuses(verified))
        items = [item for item in (whatsapp_status(s, now) for s in found) if item]
        applied = await tracking.apply(db, call.account, "whatsapp", items, now)
        ignored = len(found) - len(items) + applied.ignored
        answer = counts(len(found), applied, ignored=ignored)
        assert isinstance(answer.body, dict)
        answer.body["inbound"] = len(written)  # messages from users: windows opened
        return answer

    async def handshake(self, call: Callback, account: WhatsAppAccount) -> Answer | Refused:
        """Meta's subscription check: the challenge back when the verify token is ours."""
        if account.verify_token is None:
            return Refused(
                403,
                "webhook_not_configured",
                "set verify_token on the account to answer Meta's verification request",
            )
        given = call.query.get("hub.verify_token") or ""
        expected = account.verify_token.get_secret_value()
        mode = call.query.get("hub.mode")
        if mode != "subscribe" or not hmac.compare_digest(given.encode(), expected.encode()):
            return Refused(403, "invalid_verify_token", "hub.verify_token is not the account's")
        return Answer(call.query.get("hub.challenge") or "", media_type="text/plain")
