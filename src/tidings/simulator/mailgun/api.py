"""The simulated Mailgun Messages API: ``POST /v3/{domain}/messages``.

Same wire protocol as ``api.mailgun.net`` (Mailgun's "Messages" API reference): HTTP Basic
with the user ``api`` and the API key (otherwise a plain-text ``Forbidden`` 401), a sending
domain of the account (otherwise 404 ``Domain not found``), a urlencoded or multipart form
with ``from``, ``to``, ``subject`` and ``text`` or ``html`` (otherwise 400 with Mailgun's
``{"message": …}``), ``h:<header>`` headers, ``o:tag`` and ``v:<name>`` custom variables.
Accepted: 200 ``{"id": "<…@domain>", "message": "Queued. Thank you."}``. Mailgun has no
idempotency key: a repeated ``v:tidings_delivery_id`` is a second email, counted as a
duplicate (with ``dedup`` on, answered with the first id instead). Events follow as signed
webhooks (``events.py``).
"""

from __future__ import annotations

import base64
import binascii
import hmac
import re
import secrets
import time
from email.utils import parseaddr
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from tidings.simulator import form_data
from tidings.simulator.behaviour import OK, OUTAGE, RATE_LIMITED, ErrorNames, ProviderState
from tidings.simulator.mailgun.events import MailgunEvents
from tidings.simulator.server import HTTP_PROVIDERS, KNOWN_ERRORS, Simulator

NAME = "mailgun"
MAX_BODY = 25 * 1024 * 1024  # Mailgun's limit for a message, attachments included
DELIVERY_VARIABLE = "tidings_delivery_id"
_EMAIL = re.compile(r"[^@\s<>]+@[^@\s<>]+\.[^@\s<>]+")

# Scripted/random error name -> (status, body): Mailgun's answers (a str is plain text).
ERRORS: dict[str, tuple[int, dict[str, Any] | str]] = {
    "400": (400, {"message": "'to' parameter is not a valid address. please check documentation"}),
    "401": (401, "Forbidden"),
    "403": (
        403,
        {
            "message": "Domain is not allowed to send: Free accounts are for test purposes only. "
            "Please upgrade or add the address to authorized recipients in Account Settings."
        },
    ),
    "404": (404, {"message": "Domain not found"}),
    "413": (413, "Request Entity Too Large"),
    "429": (429, {"message": "Too many requests"}),
    "500": (500, {"message": "Internal Server Error"}),
    "502": (502, "Bad Gateway"),
    "503": (503, "Service Unavailable"),
}


class MailgunSimulator:
    def __init__(self, sim: Simulator) -> None:
        self.state: ProviderState = sim.new_state(NAME)
        self.state.error_names = ERROR_NAMES
        config = sim.config
        self.api_key = config.mailgun_api_key
        self.domains = {domain.lower() for domain in config.mailgun_domains}
        self.events = MailgunEvents(
            self.state, config.mailgun_events_url(), config.mailgun_webhook_signing_key
        )

    def routes(self) -> list[BaseRoute]:
        return [Route("/v3/{domain}/messages", self.messages, methods=["POST"])]

    async def messages(self, request: Request) -> Response:
        if not self._authenticated(request.headers.get("authorization")):
            return answer(*ERRORS["401"])
        domain = request.path_params["domain"]
        if domain.lower() not in self.domains:
            return answer(404, {"message": f"Domain not found: {domain}"})
        body = await request.body()
        if len(body) > MAX_BODY:
            return answer(*ERRORS["413"])
        form = form_data.parse(request.headers.get("content-type", ""), body)
        if form is None:
            return answer(400, {"message": "the body must be a urlencoded or multipart form"})
        problem = validate(form)
        if problem is not None:
            return answer(400, {"message": problem})
        return await self._deliver(domain, {name: values[-1] for name, values in form.items()})

    async def _deliver(self, domain: str, form: dict[str, str]) -> Response:
        address = parseaddr(form["to"])[1]
        admission = await self.state.admit(address)
        if admission == OUTAGE:
            return answer(*ERRORS["503"])
        if admission == RATE_LIMITED:
            return answer(*ERRORS["429"])
        if admission != OK:
            return answer(*error_for(admission))
        key = form.get(f"v:{DELIVERY_VARIABLE}")
        message_id = self.state.first_answer(key) or _message_id(domain)
        self.state.record(address, key, form)
        if key is not None:
            self.state.answers.setdefault(key, message_id)
        self.events.accepted(address, message_id, form)
        return answer(200, {"id": message_id, "message": "Queued. Thank you."})

    async def close(self) -> None:
        await self.events.reporter.close()

    def _authenticated(self, header: str | None) -> bool:
        scheme, _, encoded = (header or "").partition(" ")
        if scheme.lower() != "basic":
            return False
        try:
            user, _, key = base64.b64decode(encoded, validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return False
        return user == "api" and hmac.compare_digest(key.encode(), self.api_key.encode())


def validate(form: dict[str, list[str]]) -> str | None:
    """Mailgun's message for the first thing missing or malformed, or None."""
    for name in ("from", "to", "subject"):
        if not form.get(name) or not form[name][-1]:
            return f"'{name}' parameter is missing"
    if not _is_email(parseaddr(form["from"][-1])[1]):
        return "'from' parameter is not a valid address. please check documentation"
    if not all(_is_email(parseaddr(to)[1]) for to in form["to"]):
        return "'to' parameter is not a valid address. please check documentation"
    if not any(form.get(name, [""])[-1] for name in ("text", "html", "amp-html", "template")):
        return "Need at least one of 'text', 'html', 'amp-html' or 'template' parameters specified"
    return None


def error_for(name: str) -> tuple[int, dict[str, Any] | str]:
    """The answer for an error name: a documented one, any status code, or a 400."""
    if name in ERRORS:
        return ERRORS[name]
    if name.isdigit() and 400 <= int(name) <= 599:
        return int(name), {"message": f"simulated error {name}"}
    return 400, {"message": name}


def answer(status: int, body: dict[str, Any] | str) -> Response:
    if isinstance(body, str):
        return PlainTextResponse(body, status_code=status)
    return JSONResponse(body, status_code=status)


def _message_id(domain: str) -> str:
    return f"<{time.strftime('%Y%m%d%H%M%S', time.gmtime())}.{secrets.token_hex(8)}@{domain}>"


def _is_email(value: str) -> bool:
    return _EMAIL.fullmatch(value) is not None


# The error names this provider answers as documented (the control API refuses others).
ERROR_NAMES = ErrorNames(frozenset(ERRORS), r"[45]\d\d", "any HTTP status from 400 to 599")
KNOWN_ERRORS[NAME] = ERROR_NAMES
HTTP_PROVIDERS[NAME] = MailgunSimulator
