"""The simulated SendGrid v3 Mail Send endpoint.

Same wire protocol as ``api.sendgrid.com``: ``POST /v3/mail/send`` with a Bearer API key
(a wrong or missing key gets SendGrid's 401 body), request validation with SendGrid's
``{"errors": [{"message", "field", "help"}]}`` shape, 202 with ``X-Message-Id`` on success
and ``X-RateLimit-*`` headers on every answer. SendGrid has no idempotency key: a repeated
``custom_args.delivery_id`` is a second email, counted as a duplicate (with ``dedup`` on,
answered with the first message id instead, as a provider with idempotency would).
"""

from __future__ import annotations

import hmac
import json
import re
import secrets
import time
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from tidings.simulator.behaviour import OK, OUTAGE, RATE_LIMITED, ErrorNames, ProviderState
from tidings.simulator.sendgrid.events import EventWebhook
from tidings.simulator.server import HTTP_PROVIDERS, KNOWN_ERRORS

if TYPE_CHECKING:
    from tidings.simulator.server import Simulator

MAX_BODY = 30 * 1024 * 1024  # SendGrid's limit for the whole request
HELP = "http://sendgrid.com/docs/API_Reference/Web_API_v3/Mail/errors.html"
_EMAIL = re.compile(r"[^@\s<>]+@[^@\s<>]+\.[^@\s<>]+")
_TEMPLATE_ID = re.compile(
    r"d-[0-9a-f]{32}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
)


def error_body(message: str, field: str | None = None, help: str | None = None) -> dict[str, Any]:
    return {"errors": [{"message": message, "field": field, "help": help}]}


# Scripted/random error name -> (status, body): SendGrid's documented answers.
ERRORS: dict[str, tuple[int, dict[str, Any]]] = {
    "400": (
        400,
        error_body(
            "Does not contain a valid address.",
            "personalizations.0.to.0.email",
            f"{HELP}#message.personalizations.to",
        ),
    ),
    "401": (401, error_body("The provided authorization grant is invalid, expired, or revoked")),
    "403": (403, error_body("access forbidden")),
    "413": (413, error_body("Payload Too Large")),
    "429": (429, error_body("too many requests")),
    "500": (500, error_body("internal server error")),
    "502": (502, error_body("bad gateway")),
    "503": (503, error_body("service unavailable")),
}


class SendGridSimulator:
    def __init__(self, sim: Simulator) -> None:
        self.state: ProviderState = sim.new_state("sendgrid")
        self.state.error_names = ERROR_NAMES
        self.api_key = sim.config.sendgrid_api_key
        self._window = 0
        self._window_requests = 0
        self.events = EventWebhook(self.state, sim.config.sendgrid_events_url())

    def routes(self) -> list[BaseRoute]:
        return [Route("/v3/mail/send", self.mail_send, methods=["POST"])]

    async def mail_send(self, request: Request) -> Response:
        refusal = self._authenticate(request.headers.get("authorization"))
        if refusal is not None:
            return self._answer(*refusal)
        raw = await request.body()
        if len(raw) > MAX_BODY:
            return self._answer(*ERRORS["413"])
        try:
            body = json.loads(raw)
        except ValueError:
            return self._answer(400, error_body("Bad Request"))
        errors = validate(body)
        if errors:
            return self._answer(400, {"errors": errors})
        return await self._deliver(body)

    async def _deliver(self, body: dict[str, Any]) -> Response:
        personalization = body["personalizations"][0]
        address = str(personalization["to"][0]["email"])
        admission = await self.state.admit(address)
        if admission == OUTAGE:
            return self._answer(*ERRORS["503"])
        if admission == RATE_LIMITED:
            return self._answer(*ERRORS["429"], exhausted=True)
        if admission != OK:
            return self._answer(*error_for(admission))
        custom_args = personalization.get("custom_args") or {}
        key = custom_args.get("delivery_id")
        key = str(key) if key is not None else None
        message_id = self.state.first_answer(key) or secrets.token_urlsafe(16)
        self.state.record(address, key, body)
        if key is not None:
            self.state.answers.setdefault(key, message_id)
        self.events.accepted(address, message_id, custom_args, body.get("categories"))
        return self._answer(202, None, extra={"X-Message-Id": message_id})

    async def close(self) -> None:
        await self.events.reporter.close()

    def _authenticate(self, header: str | None) -> tuple[int, dict[str, Any]] | None:
        if not header:
            return 401, error_body("authorization required")
        scheme, _, key = header.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            key.strip().encode(), self.api_key.encode()
        ):
            return ERRORS["401"]
        return None

    def _answer(
        self,
        status: int,
        body: dict[str, Any] | None,
        *,
        exhausted: bool = False,
        extra: dict[str, str] | None = None,
    ) -> Response:
        headers = self._rate_headers(exhausted) | (extra or {})
        if body is None:
            return Response(status_code=status, headers=headers)
        return JSONResponse(body, status_code=status, headers=headers)

    def _rate_headers(self, exhausted: bool) -> dict[str, str]:
        """X-RateLimit-* over one-second windows, from the configured rate (else 600/s)."""
        now = int(time.time())
        if now != self._window:
            self._window, self._window_requests = now, 0
        self._window_requests += 1
        behaviour = self.state.behaviour
        limit = int(behaviour.burst or behaviour.rate_limit or 600)
        remaining = 0 if exhausted else max(0, limit - self._window_requests)
        return {
            "X-RateLimit-Limit": str(limit),
            "X-RateLimit-Remaining": str(remaining),
            "X-RateLimit-Reset": str(now + 1),
        }


def error_for(name: str) -> tuple[int, dict[str, Any]]:
    """The answer for an error name: a documented one, any status code, or a 400."""
    if name in ERRORS:
        return ERRORS[name]
    if name.isdigit() and 400 <= int(name) <= 599:
        return int(name), error_body(f"simulated error {name}")
    return 400, error_body(name)


def validate(body: Any) -> list[dict[str, Any]]:
    """SendGrid's request checks (the ones a sender can get wrong), each as an error."""
    if not isinstance(body, dict):
        return [{"message": "Bad Request", "field": None, "help": None}]
    errors = _personalization_errors(body.get("personalizations"))
    sender = body.get("from")
    if not isinstance(sender, dict) or not _is_email(sender.get("email")):
        errors.append(
            _error(
                "The from object must be provided for every email send. It is an object that "
                "requires the email parameter, but may also contain a name parameter.  e.g. "
                '{"email" : "example@example.com"}  or {"email" : "example@example.com", '
                '"name" : "Example Recipient"}.',
                "from.email",
                "message.from",
            )
        )
    template = body.get("template_id")
    if template is not None and not _is_template_id(template):
        errors.append(
            _error(
                "The template_id must be a valid template ID.", "template_id", "message.template_id"
            )
        )
    if template is None and not _has_subjects(body):
        errors.append(
            _error(
                "The subject is required. You can get around this requirement if you use a "
                "template with a subject defined or if every personalization has a subject "
                "defined.",
                "subject",
                "message.subject",
            )
        )
    if template is None or "content" in body:
        errors.extend(_content_errors(body.get("content")))
    return errors


def _is_template_id(value: Any) -> bool:
    """A dynamic template's id (``d-`` and 32 hex digits) or a legacy template's UUID."""
    return isinstance(value, str) and _TEMPLATE_ID.fullmatch(value) is not None


def _has_subjects(body: dict[str, Any]) -> bool:
    """A subject for every email: the message's, or one in each personalization (SendGrid
    takes a personalization's subject over the message's)."""
    if isinstance(body.get("subject"), str) and body["subject"]:
        return True
    personalizations = body.get("personalizations")
    return (
        isinstance(personalizations, list)
        and bool(personalizations)
        and all(
            isinstance(item, dict) and isinstance(item.get("subject"), str) and item["subject"]
            for item in personalizations
        )
    )


def _personalization_errors(personalizations: Any) -> list[dict[str, Any]]:
    if not isinstance(personalizations, list) or not 1 <= len(personalizations) <= 1000:
        return [
            _error(
                "The personalizations field is required and must have at least one "
                "personalization.",
                "personalizations",
                "-Personalizations-Errors",
            )
        ]
    errors = []
    for index, item in enumerate(personalizations):
        to = item.get("to") if isinstance(item, dict) else None
        if not isinstance(to, list) or not to:
            errors.append(
                _error(
                    "The to array is required for all personalization objects, and must have "
                    "at least one email object with a valid email address.",
                    f"personalizations.{index}.to",
                    "message.personalizations.to",
                )
            )
            continue
        errors.extend(_recipient_errors(item, index))
    return errors


def _recipient_errors(personalization: dict[str, Any], index: int) -> list[dict[str, Any]]:
    """Every to, cc and bcc a valid address, and none twice (SendGrid ignores case)."""
    errors = []
    seen: set[str] = set()
    for kind in ("to", "cc", "bcc"):
        for position, recipient in enumerate(personalization.get(kind) or []):
            email = recipient.get("email") if isinstance(recipient, dict) else None
            field = f"personalizations.{index}.{kind}.{position}.email"
            if not _is_email(email):
                errors.append(
                    _error(
                        "Does not contain a valid address.",
                        field,
                        f"message.personalizations.{kind}",
                    )
                )
            elif str(email).lower() in seen:
                errors.append(
                    _error(
                        "Each email address in the personalization block should be unique "
                        "between to, cc, and bcc. We found the first duplicate instance of "
                        f"[{email}] in the personalizations.{index}.{kind} field.",
                        f"personalizations.{index}.{kind}",
                        "message.recipient.duplicates",
                    )
                )
            else:
                seen.add(str(email).lower())
    return errors


def _content_errors(content: Any) -> list[dict[str, Any]]:
    if not isinstance(content, list) or not content:
        return [
            _error(
                "Unless a valid template_id is provided, the content parameter is required. "
                "There must be at least one defined content block. We typically suggest both "
                "text/plain and text/html blocks are included, but only one block is required.",
                "content",
                "message.content",
            )
        ]
    errors = []
    for index, block in enumerate(content):
        value = block.get("value") if isinstance(block, dict) else None
        if not isinstance(value, str) or not value:
            errors.append(
                _error(
                    "The content value must be a string at least one character in length.",
                    f"content.{index}.value",
                    "message.content.value",
                )
            )
    return errors


def _error(message: str, field: str, anchor: str) -> dict[str, Any]:
    return {"message": message, "field": field, "help": f"{HELP}#{anchor}"}


def _is_email(value: Any) -> bool:
    return isinstance(value, str) and _EMAIL.fullmatch(value) is not None


# The error names this provider answers as documented (the control API refuses others).
ERROR_NAMES = ErrorNames(frozenset(ERRORS), r"[45]\d\d", "any HTTP status from 400 to 599")
KNOWN_ERRORS["sendgrid"] = ERROR_NAMES
HTTP_PROVIDERS["sendgrid"] = SendGridSimulator
