"""The simulated Mailgun webhooks: what happened to each accepted email, one signed JSON
POST per event.

As Mailgun documents them ("Webhooks", "Securing webhooks", the event types of the Events
API): the body is ``{"signature": {"timestamp", "token", "signature"}, "event-data": {…}}``;
``signature`` is the hex HMAC-SHA256 of the timestamp followed by the token, keyed with
the HTTP webhook signing key, made afresh for every POST (a retried POST has a new token).
``event-data`` has ``event`` (delivered, failed, complained, unsubscribed, opened,
clicked), ``id``, ``timestamp`` (float seconds), ``recipient``, ``message.headers``
(``message-id`` without angle brackets), ``user-variables`` (the ``v:`` variables of the
send), ``tags``; ``failed`` has ``severity`` (permanent or temporary), ``reason`` and
``delivery-status``.

Like Mailgun, the simulator keeps a suppression list (with or without a webhook URL): an
address that bounced, complained or unsubscribed is not mailed again; a later send is
accepted (200) and then fails permanently with reason ``suppress-bounce``,
``suppress-complaint`` or ``suppress-unsubscribe``.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from email.utils import parseaddr
from typing import Any

import httpx

from tidings.simulator.behaviour import ProviderState
from tidings.simulator.reports import Reporter

_BOUNCE = {
    "severity": "permanent",
    "reason": "bounce",
    "log-level": "error",
    "delivery-status": {
        "attempt-no": 1,
        "code": 550,
        "message": "5.1.1 The email account that you tried to reach does not exist.",
        "description": "",
    },
}
_TEMPORARY = {
    "severity": "temporary",
    "reason": "generic",
    "log-level": "warn",
    "delivery-status": {
        "attempt-no": 1,
        "code": 452,
        "message": "4.2.2 The email account that you tried to reach is over quota.",
        "description": "",
    },
}
# The suppression list entry (why) -> the failure of a later send to that address.
_SUPPRESSED = {
    "bounce": ("suppress-bounce", "Not delivering to previously bounced address"),
    "complaint": (
        "suppress-complaint",
        "Not delivering to a user who marked your messages as spam",
    ),
    "unsubscribe": ("suppress-unsubscribe", "Not delivering to unsubscribed address"),
}
# An outcome of ``Behaviour.reports`` -> (events after "delivered", suppression entry).
_AFTER_DELIVERY = {
    "complaint": ("complained", "complaint"),
    "unsubscribe": ("unsubscribed", "unsubscribe"),
    "open": ("opened", None),
    "click": ("clicked", None),
}


def signature(signing_key: str, timestamp: str, token: str) -> dict[str, str]:
    digest = hmac.new(signing_key.encode(), (timestamp + token).encode(), hashlib.sha256)
    return {"timestamp": timestamp, "token": token, "signature": digest.hexdigest()}


class MailgunEvents:
    def __init__(self, state: ProviderState, url: str | None, signing_key: str) -> None:
        self.state = state
        self.url = url
        self.signing_key = signing_key
        self.suppressed: dict[str, str] = {}  # address -> why Mailgun will not mail it
        self.reporter = Reporter(state, self._post)

    def accepted(self, address: str, message_id: str, form: dict[str, str]) -> None:
        """Decide what becomes of one accepted email and schedule its events (posted only
        with a webhook URL; the suppression list is kept either way)."""
        base = _base(address, message_id, form)
        why = self.suppressed.get(address.lower())
        if why is not None:
            self.state.reports.append((address, f"suppressed:{why}"))
            reason, description = _SUPPRESSED[why]
            status = {"attempt-no": 1, "code": 605, "message": "", "description": description}
            failed = {"severity": "permanent", "reason": reason, "delivery-status": status}
            self._schedule(base | {"event": "failed", "log-level": "error", **failed})
            return
        outcome = self.state.report_outcome(address)
        if outcome == "bounce":
            self.suppressed[address.lower()] = "bounce"
            self._schedule(base | {"event": "failed", **_BOUNCE})
            return
        if outcome == "temporary":
            self._schedule(base | {"event": "failed", **_TEMPORARY}, delay_ms=0)
        self._schedule(base | {"event": "delivered", "log-level": "info"})
        event, suppress = _AFTER_DELIVERY.get(outcome, (None, None))
        if event is not None:
            extra = {"url": "https://example.com/offer"} if event == "clicked" else {}
            self._schedule(base | {"event": event, "log-level": "info", **extra})
        if suppress is not None:
            self.suppressed[address.lower()] = suppress

    def _schedule(self, event: dict[str, Any], delay_ms: float | None = None) -> None:
        # An event's id and time are fixed once: a retried POST repeats them (tidings dedupes).
        if self.url is None:
            return
        fixed = {"id": secrets.token_urlsafe(16), "timestamp": time.time()}
        self.reporter.schedule(event | fixed, delay_ms)

    async def _post(self, client: httpx.AsyncClient, items: list[object]) -> httpx.Response:
        assert self.url is not None
        [event] = items  # Mailgun posts one event per request
        signed = signature(self.signing_key, str(int(time.time())), secrets.token_hex(25))
        return await client.post(self.url, json={"signature": signed, "event-data": event})


def _base(address: str, message_id: str, form: dict[str, str]) -> dict[str, Any]:
    """What every event of one message carries."""
    variables = {k[2:]: v for k, v in form.items() if k.startswith("v:")}
    return {
        "recipient": address,
        "recipient-domain": address.rpartition("@")[2],
        "tags": [v for k, v in form.items() if k == "o:tag"],
        "user-variables": variables,
        "envelope": {"sender": parseaddr(form.get("from", ""))[1], "transport": "smtp"},
        "message": {
            "headers": {
                "message-id": message_id.strip("<>"),
                "from": form.get("from", ""),
                "to": form.get("to", ""),
                "subject": form.get("subject", ""),
            }
        },
    }
