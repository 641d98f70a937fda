"""The simulated Vonage's message status webhooks, signed as Vonage signs them.

After a message is accepted Vonage POSTs JSON to the application's status URL: ``submitted``
at once, then ``delivered``, or ``rejected``, ``undeliverable`` or ``failed`` with an
``error`` (``type``, ``title`` (the code), ``detail``). Each carries ``message_uuid``,
``to``, ``from``, ``timestamp`` (ISO 8601, UTC), ``channel`` and the ``client_ref`` of the
send. Signed webhooks carry ``Authorization: Bearer <JWT>``: HS256 with the signature
secret, claims ``iat``, ``jti``, ``iss`` (Vonage), ``payload_hash`` (the SHA-256 hex of the
body), ``api_key`` and ``application_id``.

Report names (``Behaviour.reports``): ``rejected``, ``undeliverable`` or ``failed``,
optionally with an error code (``undeliverable:1320``); anything else is delivered.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from datetime import UTC, datetime
from typing import Any

import httpx
import jwt

from tidings.simulator.behaviour import ProviderState
from tidings.simulator.reports import Reporter

FAILURES = frozenset({"rejected", "undeliverable", "failed"})
ERRORS_URL = "https://developer.vonage.com/api-errors/messages"


def sign(secret: str, body: bytes, api_key: str, application_id: str, now: float) -> str:
    """The bearer token of a signed webhook carrying ``body``."""
    claims = {
        "iat": int(now),
        "jti": str(uuid.uuid4()),
        "iss": "Vonage",
        "payload_hash": hashlib.sha256(body).hexdigest(),
        "api_key": api_key,
        "application_id": application_id,
    }
    return jwt.encode(claims, secret, algorithm="HS256")


class VonageReports:
    def __init__(
        self,
        state: ProviderState,
        signature_secret: str,
        api_key: str,
        application_id: str,
        status_url: str | None,
    ) -> None:
        self.state = state
        self.signature_secret = signature_secret
        self.api_key = api_key
        self.application_id = application_id
        self.status_url = status_url
        self.reporter = Reporter(state, self._post)

    def accepted(self, message_uuid: str, request: dict[str, Any]) -> None:
        """Schedule the status webhooks of an accepted message."""
        if self.status_url is None:
            return
        base = {
            "message_uuid": message_uuid,
            "to": request["to"],
            "from": request["from"],
            "channel": "sms",
        }
        if request.get("client_ref") is not None:
            base["client_ref"] = request["client_ref"]
        self.reporter.schedule(base | {"status": "submitted"}, delay_ms=0)
        outcome, _, code = self.state.report_outcome(str(request["to"])).partition(":")
        final = base | {"status": outcome if outcome in FAILURES else "delivered"}
        if outcome in FAILURES:
            final["error"] = {
                "type": f"{ERRORS_URL}#{code or 'unknown'}",
                "title": int(code) if code.isdigit() else (code or outcome),
                "detail": f"Message {outcome}",
            }
        self.reporter.schedule(final)

    async def _post(self, client: httpx.AsyncClient, items: list[object]) -> httpx.Response:
        [item] = items
        assert isinstance(item, dict) and self.status_url is not None
        stamped = item | {"timestamp": _iso(time.time())}
        body = json.dumps(stamped, separators=(",", ":")).encode()
        token = sign(self.signature_secret, body, self.api_key, self.application_id, time.time())
        headers = {"authorization": f"Bearer {token}", "content-type": "application/json"}
        return await client.post(self.status_url, content=body, headers=headers)


def _iso(now: float) -> str:
    moment = datetime.fromtimestamp(now, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
