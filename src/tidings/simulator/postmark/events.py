"""The simulated Postmark webhooks: what happened to each accepted email, one JSON POST per
record, with the HTTP Basic credentials of the webhook URL.

As Postmark documents them (Webhooks: Delivery, Bounce, Spam complaint, Subscription
change, Open and Click webhooks): every record has ``RecordType``, ``MessageID`` (the send's),
``MessageStream``, ``Tag``, ``Metadata`` (the send's) and ``ServerID``. A Bounce has an
``ID``, ``Type``/``TypeCode`` (HardBounce 1, SoftBounce 4096…), ``Email``, ``BouncedAt``
and ``Inactive`` (Postmark stops mailing the address); a SpamComplaint the same with Type
SpamComplaint (100001); a SubscriptionChange ``Recipient``, ``ChangedAt``, ``Origin``,
``SuppressSending`` and ``SuppressionReason`` (HardBounce, SpamComplaint,
ManualSuppression). Times are ISO 8601 in UTC with seven fractional digits.

Postmark does not sign webhooks: credentials in the URL (``https://user:pass@host/…``)
are sent as ``Authorization: Basic``; the configured username and password are used when
the URL has none.
"""

from __future__ import annotations

import itertools
import random
from datetime import UTC, datetime
from email.utils import parseaddr
from typing import Any
from urllib.parse import urlsplit

import httpx

from tidings.simulator.behaviour import ProviderState
from tidings.simulator.reports import Reporter

SERVER_ID = 23
_HARD = {
    "Type": "HardBounce",
    "TypeCode": 1,
    "Name": "Hard bounce",
    "Description": "The server was unable to deliver your message (ex: unknown user, mailbox "
    "not found).",
    "Details": "smtp;550 5.1.1 The email account that you tried to reach does not exist.",
    "Inactive": True,
    "CanActivate": True,
}
_SOFT = {
    "Type": "SoftBounce",
    "TypeCode": 4096,
    "Name": "Soft bounce/Undeliverable",
    "Description": "Unable to temporarily deliver this email.",
    "Details": "smtp;452 4.2.2 Mailbox full",
    "Inactive": False,
    "CanActivate": True,
}
_COMPLAINT = {
    "Type": "SpamComplaint",
    "TypeCode": 100001,
    "Name": "Spam complaint",
    "Description": "The subscriber explicitly marked this message as spam.",
    "Details": "",
    "Inactive": True,
    "CanActivate": False,
}


def timestamp() -> str:
    """Now as Postmark writes it: ``2019-11-05T16:33:54.9070259Z``."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f") + "0Z"


class PostmarkEvents:
    def __init__(self, state: ProviderState, url: str | None, username: str, password: str) -> None:
        self.state = state
        self.url = url
        # Credentials in the URL win, as they would at Postmark.
        parts = urlsplit(url) if url else None
        self.auth = None if parts and parts.username else httpx.BasicAuth(username, password)
        self.inactive: set[str] = set()  # addresses Postmark will not mail (406)
        self.reporter = Reporter(state, self._post)
        self._ids = itertools.count(random.Random(state.name).randrange(10**9, 10**10))

    def accepted(self, address: str, message_id: str, body: dict[str, Any]) -> None:
        """Decide what becomes of one accepted email and schedule its records (posted only
        with a webhook URL; inactive addresses are kept either way)."""
        base = {
            "MessageID": message_id,
            "MessageStream": body.get("MessageStream") or "outbound",
            "Tag": body.get("Tag") or "",
            "Metadata": body.get("Metadata") or {},
            "ServerID": SERVER_ID,
        }
        outcome = self.state.report_outcome(address)
        if outcome in ("bounce", "soft_bounce"):
            self._bounce("Bounce", base, address, body, _HARD if outcome == "bounce" else _SOFT)
            if outcome == "bounce":
                self._suppressed(base, address, "HardBounce")
            return
        self._schedule(base | {"RecordType": "Delivery", "Recipient": address, "Details": ""})
        if outcome == "complaint":
            self._bounce("SpamComplaint", base, address, body, _COMPLAINT)
            self._suppressed(base, address, "SpamComplaint")
        elif outcome == "unsubscribe":
            self._suppressed(base, address, "ManualSuppression")
        elif outcome in ("open", "click"):
            self._schedule(base | _engagement(outcome, address))

    def _bounce(
        self,
        record: str,
        base: dict[str, Any],
        address: str,
        body: dict[str, Any],
        kind: dict[str, Any],
    ) -> None:
        if kind["Inactive"]:
            self.inactive.add(address.lower())
        sender = parseaddr(str(body.get("From", "")))[1]
        fields = {"RecordType": record, "ID": next(self._ids), "Email": address, "From": sender}
        fields |= {"Subject": body.get("Subject") or "", "DumpAvailable": False}
        self._schedule(base | kind | fields | {"BouncedAt": timestamp()})

    def _suppressed(self, base: dict[str, Any], address: str, reason: str) -> None:
        self.inactive.add(address.lower())
        change = {
            "RecordType": "SubscriptionChange",
            "Recipient": address,
            "ChangedAt": timestamp(),
            "Origin": "Recipient",  # the bounce, complaint or unsubscription was theirs
            "SuppressSending": True,
            "SuppressionReason": reason,
        }
        self._schedule(base | change)

    def _schedule(self, record: dict[str, Any]) -> None:
        if self.url is not None:
            self.reporter.schedule(record)

    async def _post(self, client: httpx.AsyncClient, items: list[object]) -> httpx.Response:
        assert self.url is not None
        [record] = items  # one record per request
        return await client.post(self.url, json=record, auth=self.auth or httpx.USE_CLIENT_DEFAULT)


def _engagement(outcome: str, address: str) -> dict[str, Any]:
    record: dict[str, Any] = {
        "RecordType": "Open" if outcome == "open" else "Click",
        "Recipient": address,
        "ReceivedAt": timestamp(),
        "Platform": "Desktop",
    }
    if outcome == "click":
        record |= {"OriginalLink": "https://example.com/offer", "ClickLocation": "HTML"}
    else:
        record["FirstOpen"] = True
    return record
