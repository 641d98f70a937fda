"""The simulated SparkPost webhooks: batches (a JSON array) of ``{"msys": {...}}`` events,
with the webhook's Basic credentials or its ``auth_token`` header.

As SparkPost documents them ("Webhooks", event types): message events ``injection``,
``delivery``, ``bounce`` (``bounce_class``: 10 invalid recipient, 21 DNS failure…),
``spam_complaint`` (``fbtype`` abuse); track events ``open``, ``click``
(``target_link_url``); unsubscribe events ``list_unsubscribe``. Every event has
``event_id``, ``timestamp`` (Unix seconds as a string), ``transmission_id``,
``message_id``, ``rcpt_to``, ``rcpt_meta`` (the recipient's metadata) and ``campaign_id``.
"""

from __future__ import annotations

import random
import time
from typing import Any

import httpx

from tidings.simulator.behaviour import ProviderState
from tidings.simulator.reports import Reporter

TOKEN_HEADER = "X-MessageSystems-Webhook-Token"
BATCH = 100
_BOUNCES = {
    "bounce": ("10", "550 5.1.1 <{to}>: Recipient address rejected: User unknown"),
    "soft_bounce": ("22", "452 4.2.2 <{to}>: Mailbox full"),
}


class SparkPostEvents:
    def __init__(
        self,
        state: ProviderState,
        url: str | None,
        basic: tuple[str, str],
        token: str | None,
    ) -> None:
        self.state = state
        self.url = url
        self.basic = basic
        self.token = token
        self.suppressed: set[str] = set()  # addresses SparkPost will not mail (1902)
        self.reporter = Reporter(state, self._post, batch=BATCH)
        self._ids = random.Random(f"{state.name}:events")

    def accepted(self, address: str, transmission_id: str, body: dict[str, Any]) -> None:
        first = body["recipients"][0]
        base = {
            "transmission_id": transmission_id,
            "message_id": f"{self._ids.getrandbits(64):016x}",
            "rcpt_to": address,
            "raw_rcpt_to": address,
            "rcpt_meta": first.get("metadata") or {},
            "campaign_id": body.get("campaign_id") or "",
        }
        outcome = self.state.report_outcome(address)
        self._schedule("message_event", base | {"type": "injection"})
        if outcome in _BOUNCES:
            bounce_class, reason = _BOUNCES[outcome]
            bounce = {"type": "bounce", "bounce_class": bounce_class}
            self._schedule("message_event", base | bounce | {"reason": reason.format(to=address)})
            if outcome == "bounce":
                self.suppressed.add(address.lower())
            return
        self._schedule("message_event", base | {"type": "delivery"})
        if outcome == "complaint":
            self.suppressed.add(address.lower())
            self._schedule("message_event", base | {"type": "spam_complaint", "fbtype": "abuse"})
        elif outcome == "unsubscribe":
            self.suppressed.add(address.lower())
            self._schedule("unsubscribe_event", base | {"type": "list_unsubscribe"})
        elif outcome == "open":
            self._schedule("track_event", base | {"type": "open", "user_agent": "Mozilla/5.0"})
        elif outcome == "click":
            link = {"type": "click", "target_link_url": "https://example.com/offer"}
            self._schedule("track_event", base | link)

    def _schedule(self, category: str, event: dict[str, Any]) -> None:
        if self.url is None:
            return
        event |= {
            "event_id": str(self._ids.randrange(10**17, 10**18)),
            "timestamp": str(int(time.time())),
        }
        self.reporter.schedule({"msys": {category: event}})

    async def _post(self, client: httpx.AsyncClient, items: list[object]) -> httpx.Response:
        assert self.url is not None
        if self.token is not None:
            return await client.post(self.url, json=items, headers={TOKEN_HEADER: self.token})
        return await client.post(self.url, json=items, auth=httpx.BasicAuth(*self.basic))
