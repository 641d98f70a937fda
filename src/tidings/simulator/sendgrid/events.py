"""The simulated SendGrid Event Webhook: what happened to each accepted email, posted as a
signed JSON array of events.

As SendGrid documents it (Event Webhook reference; "Getting started with the Event Webhook
security features"): each event has ``email``, ``timestamp``, ``event``, ``sg_event_id``,
``sg_message_id`` (the ``X-Message-Id`` of the send, a dot, then more), the message's
categories and every custom arg at the top level. ``bounce`` has ``type`` (``bounce`` or
``blocked``), ``status`` and ``reason``; ``dropped`` a ``reason``. The request carries
``X-Twilio-Email-Event-Webhook-Signature``: ECDSA P-256 with SHA-256 over the timestamp
header followed by the raw body, base64 of the DER signature; the verification key is shown
as base64 DER SubjectPublicKeyInfo.

Like SendGrid, the simulator keeps its own suppression list: an address that bounced or
reported spam is not mailed again; a later send is accepted (202) and then ``dropped``.
"""

from __future__ import annotations

import base64
import json
import secrets
import time
from typing import Any

import httpx
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from tidings.simulator.behaviour import ProviderState
from tidings.simulator.reports import Reporter

SIGNATURE_HEADER = "X-Twilio-Email-Event-Webhook-Signature"
TIMESTAMP_HEADER = "X-Twilio-Email-Event-Webhook-Timestamp"
BATCH = 1000  # events per POST at most
_BOUNCE = {
    "type": "bounce",
    "status": "5.1.1",
    "reason": "550 5.1.1 The email account that you tried to reach does not exist.",
}
_BLOCKED = {
    "type": "blocked",
    "status": "5.7.1",
    "reason": "550 5.7.1 Message rejected due to local policy",
}
# Why SendGrid drops a message to an address on its suppression list.
_DROP_REASONS = {"bounce": "Bounced Address", "spamreport": "Spam Reporting Address"}


class EventWebhook:
    def __init__(self, state: ProviderState, url: str | None) -> None:
        self.state = state
        self.url = url
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.suppressed: dict[str, str] = {}  # address -> why SendGrid will not mail it
        self.reporter = Reporter(state, self._post, batch=BATCH)

    def _schedule(self, event: dict[str, Any], delay_ms: float | None = None) -> None:
        # An event's id and time are fixed once: a retried POST repeats them (tidings dedupes).
        fixed = {"timestamp": int(time.time()), "sg_event_id": secrets.token_urlsafe(16)}
        self.reporter.schedule(event | fixed, delay_ms)

    @property
    def public_key(self) -> str:
        """The verification key as SendGrid's settings page shows it."""
        der = self.key.public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        return base64.b64encode(der).decode()

    def accepted(
        self, address: str, message_id: str, custom_args: dict[str, Any], categories: Any
    ) -> None:
        """Schedule the events of one accepted email (none without a webhook URL)."""
        if self.url is None:
            return
        base = {"email": address, **custom_args, "sg_message_id": f"{message_id}.sim0.0"}
        if isinstance(categories, list):
            base["category"] = categories
        reason = self.suppressed.get(address.lower())
        if reason is not None:
            self.state.reports.append((address, "dropped"))
            self._schedule(base | {"event": "dropped", "reason": reason})
            return
        self._schedule(base | {"event": "processed"}, delay_ms=0)
        outcome = self.state.report_outcome(address)
        if outcome == "bounce":
            self.suppressed[address.lower()] = _DROP_REASONS["bounce"]
            self._schedule(base | {"event": "bounce", **_BOUNCE})
        elif outcome == "blocked":
            self._schedule(base | {"event": "bounce", **_BLOCKED})
        else:
            self._schedule(base | {"event": "delivered", "response": "250 OK"})
            if outcome == "spamreport":
                self.suppressed[address.lower()] = _DROP_REASONS["spamreport"]
                self._schedule(base | {"event": "spamreport"})

    async def _post(self, client: httpx.AsyncClient, items: list[object]) -> httpx.Response:
        assert self.url is not None
        body = json.dumps(items).encode()
        timestamp = str(int(time.time()))
        signature = self.key.sign(timestamp.encode() + body, ec.ECDSA(hashes.SHA256()))
        headers = {
            "Content-Type": "application/json",
            SIGNATURE_HEADER: base64.b64encode(signature).decode(),
            TIMESTAMP_HEADER: timestamp,
        }
        return await client.post(self.url, content=body, headers=headers)
