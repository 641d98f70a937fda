"""The simulated Resend webhooks: what happened to each accepted email, one JSON POST per
event, signed by Svix as Resend's are.

As Resend documents them ("Webhooks", event types): ``{"type", "created_at", "data"}`` with
``data.email_id`` (the send's ``id``), ``from``, ``to``, ``subject``, ``created_at`` and
``tags`` (the send's, as an object of name -> value). Types: ``email.sent``, then
``email.delivered``, ``email.bounced`` (``data.bounce``: ``type`` Permanent or Transient,
``subType``, ``message``), ``email.complained`` (after the delivery), ``email.opened``,
``email.clicked`` (``data.click.link``).

Svix headers: ``svix-id`` (``msg_…``, the same on each retry of one event),
``svix-timestamp`` and ``svix-signature`` (``v1,`` + base64 HMAC-SHA256 of
``{id}.{timestamp}.{body}`` keyed with the base64 bytes after ``whsec_``).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from datetime import UTC, datetime
from typing import Any

import httpx

from tidings.simulator.behaviour import ProviderState
from tidings.simulator.reports import Reporter


def timestamp() -> str:
    """Now as Resend writes it: ``2024-02-22T23:41:12.126Z``."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def svix_headers(secret: str, msg_id: str, body: bytes, at: int | None = None) -> dict[str, str]:
    stamp = int(time.time()) if at is None else at
    encoded = secret.removeprefix("whsec_")
    key = base64.b64decode(encoded + "=" * (-len(encoded) % 4))
    digest = hmac.new(key, f"{msg_id}.{stamp}.".encode() + body, hashlib.sha256).digest()
    return {
        "svix-id": msg_id,
        "svix-timestamp": str(stamp),
        "svix-signature": "v1," + base64.b64encode(digest).decode(),
        "content-type": "application/json",
    }


class ResendEvents:
    def __init__(
        self,
        state: ProviderState,
        url: str | None,
        secret: str,
        subscribed: list[str] | None = None,
    ) -> None:
        self.state = state
        self.url = url
        self.secret = secret
        # The event types the endpoint is subscribed to; None: all.
        self.subscribed = None if subscribed is None else frozenset(subscribed)
        self.reporter = Reporter(state, self._post)

    def accepted(self, address: str, email_id: str, body: dict[str, Any]) -> None:
        """Decide what becomes of one accepted email and schedule its events."""
        tags = {
            str(t.get("name")): str(t.get("value"))
            for t in body.get("tags") or []
            if isinstance(t, dict)
        }
        to = body["to"] if isinstance(body["to"], list) else [body["to"]]
        data = {
            "email_id": email_id,
            "created_at": timestamp(),
            "from": body.get("from"),
            "to": to,
            "subject": body.get("subject"),
            "tags": tags,
        }
        outcome = self.state.report_outcome(address)
        self._schedule("email.sent", data)
        if outcome in ("bounce", "soft_bounce"):
            self._schedule("email.bounced", data | {"bounce": _bounce(outcome == "bounce")})
            return
        self._schedule("email.delivered", data)
        if outcome == "complaint":
            self._schedule("email.complained", data)
        elif outcome == "open":
            self._schedule("email.opened", data)
        elif outcome == "click":
            click = {"link": "https://example.com/offer", "timestamp": timestamp()}
            self._schedule("email.clicked", data | {"click": click})

    def _schedule(self, kind: str, data: dict[str, Any]) -> None:
        if self.url is not None and (self.subscribed is None or kind in self.subscribed):
            event = {"type": kind, "created_at": timestamp(), "data": data}
            self.reporter.schedule((f"msg_{secrets.token_hex(12)}", event))

    async def _post(self, client: httpx.AsyncClient, items: list[object]) -> httpx.Response:
        assert self.url is not None
        [item] = items  # one event per request
        assert isinstance(item, tuple)
        msg_id, event = item
        body = json.dumps(event).encode()
        return await client.post(
            self.url, content=body, headers=svix_headers(self.secret, msg_id, body)
        )


def _bounce(hard: bool) -> dict[str, str]:
    if hard:
        return {
            "type": "Permanent",
            "subType": "General",
            "message": "The recipient's email provider sent a hard bounce message.",
        }
    return {
        "type": "Transient",
        "subType": "MailboxFull",
        "message": "The recipient's mailbox is full.",
    }
