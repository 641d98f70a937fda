"""The simulated Resend email API: ``POST /emails``.

Same wire protocol as ``api.resend.com`` (Resend's API reference: "Send Email", "Errors",
"Idempotency Keys"): ``Authorization: Bearer <key>`` (missing: 401 ``missing_api_key``;
wrong: 403 ``invalid_api_key``), a JSON body with ``from`` at a verified domain (else 403
``validation_error``; unreadable: 422 ``invalid_from_address``), ``to`` (one address or a
list of at most 50), ``subject`` (else 422 ``missing_required_field``), ``text`` or
``html``, ``tags`` of ASCII letters, digits, ``_`` and ``-``. Errors are
``{"statusCode", "name", "message"}``. Accepted: 200 ``{"id"}``.

The ``Idempotency-Key`` header is honoured as Resend documents it (``idempotency.py``):
a repeated key within 24 hours is answered with the first ``id`` and sends nothing. This is
the only simulated email provider that dedupes by a key of the sender's.
Events follow as Svix-signed webhooks (``events.py``).
"""

from __future__ import annotations

import hmac
import json
import re
import uuid
from email.utils import parseaddr
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from tidings.simulator.behaviour import OK, OUTAGE, RATE_LIMITED, ErrorNames, ProviderState
from tidings.simulator.lost_answer import ANSWER_LOST, LostAnswer
from tidings.simulator.resend.events import ResendEvents
from tidings.simulator.resend.idempotency import IdempotencyKeys
from tidings.simulator.server import HTTP_PROVIDERS, KNOWN_ERRORS, Simulator

NAME = "resend"
MAX_BODY = 40 * 1024 * 1024  # attachments included, Resend takes up to 40 MB
MAX_RECIPIENTS = 50
_EMAIL = re.compile(r"[^@\s<>]+@[^@\s<>]+\.[^@\s<>]+")
_TAG = re.compile(r"[A-Za-z0-9_-]{1,256}")
# A script name for the 403 validation_error of an unverified sending domain.
DOMAIN_NOT_VERIFIED = "domain_not_verified"

# Resend's error names (API reference, "Errors"): name -> (HTTP status, message).
ERRORS: dict[str, tuple[int, str]] = {
    "invalid_idempotency_key": (400, "The key must be between 1-256 chars."),
    "validation_error": (400, "We found an error with one or more fields in the request."),
    "missing_api_key": (401, "Missing API key in the authorization header."),
    "restricted_api_key": (401, "This API key is restricted to only send emails."),
    "invalid_api_key": (403, "API key is invalid."),
    "not_found": (404, "The requested endpoint does not exist."),
    "method_not_allowed": (405, "Method is not allowed for the requested path."),
    "invalid_idempotent_request": (
        409,
        "Same idempotency key used with a different request payload.",
    ),
    "concurrent_idempotent_requests": (
        409,
        "Same idempotency key used while original request is still in progress.",
    ),
    "invalid_attachment": (422, "Attachment must have either a content or path."),
    "invalid_from_address": (422, "Invalid `from` field."),
    "invalid_parameter": (422, "The parameter must be a valid UUID."),
    "missing_required_field": (422, "The request body is missing one or more required fields."),
    "daily_quota_exceeded": (429, "You have reached your daily email sending quota."),
    "monthly_quota_exceeded": (429, "You have reached your monthly email sending quota."),
    "rate_limit_exceeded": (
        429,
        "Too many requests. Please limit the number of requests per second.",
    ),
    "security_error": (451, "We may have found a security issue with the request."),
    "application_error": (500, "An unexpected error occurred."),
    "internal_server_error": (500, "An unexpected error occurred."),
}


def error_response(name: str, message: str = "", headers: dict[str, str] | None = None) -> Response:
    status, text = ERRORS.get(name, (422, name))
    if name == "rate_limit_exceeded":
        headers = _RATE_HEADERS | (headers or {})
    body = {"statusCode": status, "name": name, "message": message or text}
    return JSONResponse(body, status_code=status, headers=headers)


class ResendSimulator:
    def __init__(self, sim: Simulator) -> None:
        self.state: ProviderState = sim.new_state(NAME)
        self.state.error_names = ERROR_NAMES
        config = sim.config
        self.api_key = config.resend_api_key
        self.domains = {domain.lower() for domain in config.resend_domains}
        self.keys = IdempotencyKeys()
        self.events = ResendEvents(
            self.state,
            config.resend_events_url(),
            config.resend_webhook_secret,
            config.resend_webhook_events,
        )

    def routes(self) -> list[BaseRoute]:
        return [Route("/emails", self.emails, methods=["POST"])]

    async def emails(self, request: Request) -> Response:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token:
            return error_response("missing_api_key")
        if not hmac.compare_digest(token.encode(), self.api_key.encode()):
            return error_response("invalid_api_key")
        raw = await request.body()
        if len(raw) > MAX_BODY:
            return error_response("validation_error", "The request body is too large.")
        try:
            body: Any = json.loads(raw)
        except ValueError:
            return error_response("validation_error", "Invalid JSON body.")
        key = request.headers.get("idempotency-key")
        if key is None:
            refusal = self._invalid(body)
            return refusal if refusal is not None else await self._deliver(body, None)
        return await self._keyed(key, body)

    async def _keyed(self, key: str, body: Any) -> Response:
        if not IdempotencyKeys.valid(key):
            return error_response("invalid_idempotency_key")
        decision, first = self.keys.begin(key, body)
        if decision == "replay":
            self.state.counts["replayed"] += 1
            return JSONResponse(first)
        if decision == "conflict":
            return error_response("invalid_idempotent_request")
        if decision == "in_progress":
            return error_response("concurrent_idempotent_requests")
        response: Response | None = None
        try:
            response = self._invalid(body) or await self._deliver(body, key)
        finally:
            if response is None or response.status_code != 200:
                self.keys.release(key)
        return response

    def _invalid(self, body: Any) -> Response | None:
        """Resend's answer to a request it will not take, or None."""
        if not isinstance(body, dict):
            return error_response("validation_error", "The request body must be an object.")
        for name in ("from", "subject"):
            if not isinstance(body.get(name), str) or not body[name]:
                return error_response("missing_required_field", f"Missing `{name}` field.")
        sender = parseaddr(body["from"])[1]
        if not _EMAIL.fullmatch(sender):
            return error_response(
                "invalid_from_address",
                "Invalid `from` field. The email address needs to follow the "
                "`email@example.com` or `Name <email@example.com>` format.",
            )
        domain = sender.rpartition("@")[2].lower()
        if domain not in self.domains:
            return _403(
                f"The {domain} domain is not verified. Please, add and verify your domain "
                "on https://resend.com/domains"
            )
        return self._invalid_recipients(body) or self._invalid_content(body)

    def _invalid_recipients(self, body: dict[str, Any]) -> Response | None:
        to = body.get("to")
        addresses = [to] if isinstance(to, str) else to
        if not isinstance(addresses, list) or not addresses:
            return error_response("missing_required_field", "Missing `to` field.")
        if len(addresses) > MAX_RECIPIENTS:
            return error_response("validation_error", "Too many recipients: at most 50.")
        for address in addresses:
            if not isinstance(address, str) or not _EMAIL.fullmatch(parseaddr(address)[1]):
                return error_response("validation_error", f"Invalid `to` field: {address!r}.")
        return None

    def _invalid_content(self, body: dict[str, Any]) -> Response | None:
        if not body.get("text") and not body.get("html"):
            return error_response("validation_error", "Missing `html` or `text` field.")
        tags = body.get("tags") or []
        if not isinstance(tags, list) or not all(
            isinstance(t, dict)
            and _TAG.fullmatch(str(t.get("name", "")))
            and _TAG.fullmatch(str(t.get("value", "")))
            for t in tags
        ):
            return error_response(
                "validation_error",
                "Tags should only contain ASCII letters, numbers, underscores, or dashes.",
            )
        return None

    async def _deliver(self, body: dict[str, Any], key: str | None) -> Response:
        to = body["to"]
        address = parseaddr(to if isinstance(to, str) else to[0])[1]
        admission = await self.state.admit(address)
        if admission == OUTAGE:
            return error_response("internal_server_error")
        if admission == RATE_LIMITED:
            return error_response("rate_limit_exceeded")
        if admission == DOMAIN_NOT_VERIFIED:
            return _403("The example.com domain is not verified. Please, add and verify it.")
        if admission not in (OK, ANSWER_LOST):
            return error_response(admission)
        answer = {"id": str(uuid.uuid4())}
        delivery = _delivery_tag(body) or key
        self.state.record(address, delivery, body)
        if delivery is not None:
            self.state.answers.setdefault(delivery, answer)
        if key is not None:
            self.keys.done(key, answer)
        self.events.accepted(address, answer["id"], body)
        return LostAnswer() if admission == ANSWER_LOST else JSONResponse(answer)

    async def close(self) -> None:
        await self.events.reporter.close()


# Resend's rate limit headers (IETF draft names), on its 429.
_RATE_HEADERS = {"retry-after": "1", "ratelimit-limit": "2", "ratelimit-remaining": "0",
                 "ratelimit-reset": "1"}  # fmt: skip


def _403(message: str) -> Response:
    body = {"statusCode": 403, "name": "validation_error", "message": message}
    return JSONResponse(body, status_code=403)


def _delivery_tag(body: dict[str, Any]) -> str | None:
    """The delivery id tidings tags its emails with: what the simulator knows a repeat by."""
    for tag in body.get("tags") or []:
        if isinstance(tag, dict) and tag.get("name") == "tidings_delivery_id":
            return str(tag.get("value"))
    return None


# The error names this provider answers as documented (the control API refuses others).
ERROR_NAMES = ErrorNames(frozenset(ERRORS) | {ANSWER_LOST, DOMAIN_NOT_VERIFIED})
KNOWN_ERRORS[NAME] = ERROR_NAMES
HTTP_PROVIDERS[NAME] = ResendSimulator
