"""The simulated SparkPost Transmissions API: ``POST /api/v1/transmissions``.

Same wire protocol as ``api.sparkpost.com`` (SparkPost's API reference, "Transmissions", and
"Extended Error Codes"): ``Authorization: <api key>`` (missing or wrong: 401), a JSON body
(else 422 code 1300) with ``recipients`` (a non-empty list of ``{"address": {"email"}}``,
else 422 code 1400), ``content.from`` at a sending domain of the account (else 400 code
7001, "Unconfigured Sending Domain"), ``content.subject`` and ``text`` or ``html`` (422 code
1400). Errors are ``{"errors": [{"message", "code", "description"}]}``. Accepted: 200
``{"results": {"total_rejected_recipients", "total_accepted_recipients", "id"}}``.

Like SparkPost, it keeps a suppression list: an address that hard-bounced, complained or
unsubscribed is refused later (400 code 1902, "recipient address suppressed due to customer
policy"). SparkPost documents no idempotency key: a repeated transmission (the same
``tidings_delivery_id`` in the recipient's metadata) is a second email, counted as a
duplicate (with ``dedup`` on, answered as the first).
"""

from __future__ import annotations

import hmac
import json
import random
import re
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from tidings.simulator.behaviour import OK, OUTAGE, RATE_LIMITED, ErrorNames, ProviderState
from tidings.simulator.lost_answer import ANSWER_LOST, LostAnswer
from tidings.simulator.server import HTTP_PROVIDERS, KNOWN_ERRORS, Simulator
from tidings.simulator.sparkpost.events import SparkPostEvents

NAME = "sparkpost"
MAX_BODY = 20 * 1024 * 1024  # SparkPost's limit for a transmission
DELIVERY_METADATA = "tidings_delivery_id"
_EMAIL = re.compile(r"[^@\s<>]+@[^@\s<>]+\.[^@\s<>]+")
_ADDRESS = re.compile(r"(?:.*<)?([^<>\s]+@[^<>\s]+)>?\s*")

# Extended error code -> (HTTP status, message, description).
ERRORS: dict[str, tuple[int, str, str]] = {
    "1100": (403, "permission denied", "Permission denied"),
    "1200": (400, "invalid params", "Invalid parameters"),
    "1300": (422, "invalid data format/type", "Problems parsing request as json"),
    "1400": (422, "required field is missing", "A required field is missing"),
    "1500": (500, "Failed to update database", ""),
    "1502": (400, "Server resources unavailable", "Retry later"),
    "1900": (503, "Message generation module not available", ""),
    "1901": (400, "Message failed to generate", ""),
    "1902": (
        400,
        "Message generation rejected",
        "recipient address suppressed due to customer policy",
    ),
    "1910": (400, "Message generation not configured", ""),
    "2101": (420, "Exceed Sending Limit (hourly)", ""),
    "2102": (420, "Exceed Sending Limit (daily)", ""),
    "2103": (420, "Exceed Sending Limit (sandbox)", ""),
    "2105": (420, "Exceed Sending Limit (monthly)", ""),
    "7000": (400, "Sending domain blacklisted", ""),
    "7001": (400, "Invalid domain", "Unconfigured Sending Domain <{domain}>"),
}
# Error names that are bare HTTP answers (no extended code).
HTTP_ERRORS = {
    "http_401": (401, "Unauthorized."),
    "http_413": (413, "Request Entity Too Large"),
    "http_429": (429, "Too many requests"),
    "http_500": (500, "Internal Server Error"),
    "http_503": (503, "Service Unavailable"),
}


def error_response(code: str, domain: str = "", description: str = "") -> Response:
    status, message, text = ERRORS.get(code, (400, code, ""))
    error = {
        "message": message,
        "code": code,
        "description": description or text.format(domain=domain),
    }
    return JSONResponse({"errors": [error]}, status_code=status)


def http_error(name: str) -> Response:
    status, message = HTTP_ERRORS[name]
    return JSONResponse({"errors": [{"message": message}]}, status_code=status)


class SparkPostSimulator:
    def __init__(self, sim: Simulator) -> None:
        self.state: ProviderState = sim.new_state(NAME)
        self.state.error_names = ERROR_NAMES
        config = sim.config
        self.api_key = config.sparkpost_api_key
        self.domains = {domain.lower() for domain in config.sparkpost_domains}
        self.events = SparkPostEvents(
            self.state,
            config.sparkpost_events_url(),
            (config.sparkpost_webhook_username, config.sparkpost_webhook_password),
            config.sparkpost_webhook_token,
        )
        self._ids = random.Random(f"{config.seed}:sparkpost-ids")

    def routes(self) -> list[BaseRoute]:
        return [Route("/api/v1/transmissions", self.transmissions, methods=["POST"])]

    async def transmissions(self, request: Request) -> Response:
        key = request.headers.get("authorization", "")
        if not key or not hmac.compare_digest(key.encode(), self.api_key.encode()):
            return http_error("http_401")
        raw = await request.body()
        if len(raw) > MAX_BODY:
            return http_error("http_413")
        try:
            body: Any = json.loads(raw)
        except ValueError:
            return error_response("1300")
        refusal = self._invalid(body)
        return refusal if refusal is not None else await self._deliver(body)

    def _invalid(self, body: Any) -> Response | None:
        if not isinstance(body, dict) or not isinstance(body.get("content"), dict):
            return error_response("1400", description="content is required")
        recipients = body.get("recipients")
        if not isinstance(recipients, list) or not recipients:
            return error_response("1400", description="recipients is required")
        for item in recipients:
            address = item.get("address") if isinstance(item, dict) else None
            email = address.get("email") if isinstance(address, dict) else None
            if not isinstance(email, str) or not _EMAIL.fullmatch(email):
                return error_response("1200", description=f"Invalid recipient address {email!r}")
        content = body["content"]
        sender = _sender(content.get("from"))
        if sender is None:
            return error_response("1400", description="content.from is required")
        domain = sender.rpartition("@")[2].lower()
        if domain not in self.domains:
            return error_response("7001", domain=domain)
        if not content.get("subject"):
            return error_response("1400", description="content.subject is required")
        if not content.get("text") and not content.get("html"):
            return error_response("1400", description="content.text or content.html is required")
        return None

    async def _deliver(self, body: dict[str, Any]) -> Response:
        first = body["recipients"][0]
        address = first["address"]["email"]
        admission = await self.state.admit(address)
        if admission == OUTAGE:
            return http_error("http_503")
        if admission == RATE_LIMITED:
            return http_error("http_429")
        if admission in HTTP_ERRORS:
            return http_error(admission)
        if admission not in (OK, ANSWER_LOST):
            return error_response(admission)
        if address.lower() in self.events.suppressed:
            return error_response("1902")
        meta = first.get("metadata") or {}
        key = str(meta[DELIVERY_METADATA]) if DELIVERY_METADATA in meta else None
        repeated = self.state.first_answer(key)
        self.state.record(address, key, body)
        if repeated is not None:
            return JSONResponse(repeated)
        transmission_id = str(self._ids.randrange(10**16, 10**17))
        count = len(body["recipients"])
        results = {"total_rejected_recipients": 0, "total_accepted_recipients": count}
        answer = {"results": results | {"id": transmission_id}}
        if key is not None:
            self.state.answers.setdefault(key, answer)
        self.events.accepted(address, transmission_id, body)
        return LostAnswer() if admission == ANSWER_LOST else JSONResponse(answer)

    async def close(self) -> None:
        await self.events.reporter.close()


def _sender(value: Any) -> str | None:
    """``content.from``: an address, ``Name <address>``, or ``{"email", "name"}``."""
    if isinstance(value, dict):
        value = value.get("email")
    if not isinstance(value, str):
        return None
    found = _ADDRESS.fullmatch(value)
    return found.group(1) if found else None


# The error names this provider answers as documented (the control API refuses others).
ERROR_NAMES = ErrorNames(frozenset(ERRORS) | frozenset(HTTP_ERRORS) | {ANSWER_LOST})
KNOWN_ERRORS[NAME] = ERROR_NAMES
HTTP_PROVIDERS[NAME] = SparkPostSimulator
