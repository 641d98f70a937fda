"""The simulated Postmark Email API: ``POST /email``.

Same wire protocol as ``api.postmarkapp.com`` (Postmark's "Email API" reference and API
overview): ``X-Postmark-Server-Token`` (missing or wrong: 401 with ErrorCode 10), a JSON
body (``Content-Type: application/json``, else ErrorCode 409; unparseable 402; not the
expected shape 403) with ``From`` a sender signature of the server (else 400), ``To`` a
valid address and ``TextBody`` or ``HtmlBody`` (else 300). Errors are
``{"ErrorCode", "Message"}``, with HTTP 422 unless noted. Accepted: 200
``{"To", "SubmittedAt", "MessageID", "ErrorCode": 0, "Message": "OK"}``.

Like Postmark, it marks an address that hard-bounced, complained or unsubscribed inactive:
a later send to it is refused with ErrorCode 406. Postmark has no idempotency key: a
repeated ``Metadata.tidings_delivery_id`` is a second email, counted as a duplicate (with
``dedup`` on, answered as the first). Events follow as Basic-authenticated webhooks
(``events.py``).
"""

from __future__ import annotations

import hmac
import json
import re
import uuid
from datetime import UTC, datetime
from email.utils import parseaddr
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from tidings.simulator.behaviour import OK, OUTAGE, RATE_LIMITED, ErrorNames, ProviderState
from tidings.simulator.postmark.events import PostmarkEvents
from tidings.simulator.server import HTTP_PROVIDERS, KNOWN_ERRORS, Simulator

NAME = "postmark"
TOKEN_HEADER = "x-postmark-server-token"
MAX_BODY = 10 * 1024 * 1024  # the Email API's limit for one request
DELIVERY_METADATA = "tidings_delivery_id"
_EMAIL = re.compile(r"[^@\s<>]+@[^@\s<>]+\.[^@\s<>]+")
# Fields that are strings when given (Cc and Bcc: comma-separated addresses).
_STRINGS: tuple[str, ...] = (
    *("From", "To", "Cc", "Bcc", "ReplyTo"),
    *("Subject", "TextBody", "HtmlBody", "Tag", "MessageStream"),
)

# API error code -> (HTTP status, message); ``{to}`` and ``{sender}`` are filled in.
ERRORS: dict[int, tuple[int, str]] = {
    10: (401, "Request does not contain a valid Server token."),
    100: (503, "Maintenance"),
    300: (422, "Invalid email request"),
    400: (
        422,
        "The 'From' address you supplied ({sender}) is not a Sender Signature on your account. "
        "Please add and confirm this address in order to be able to use it in the 'From' "
        "field of your messages.",
    ),
    401: (422, "The 'From' address you supplied ({sender}) has not been confirmed yet."),
    402: (422, "Received invalid JSON input."),
    403: (422, "The JSON input you provided is syntactically correct, but not what we expect."),
    405: (422, "You are not allowed to send: your account has run out of credits."),
    406: (
        422,
        "You tried to send to recipient(s) that have been marked as inactive. Found inactive "
        "addresses: {to}. Inactive recipients are ones that have generated a hard bounce, a "
        "spam complaint, or a manual suppression.",
    ),
    409: (
        422,
        "Your HTTP request does not have the Accept and Content-Type headers set to "
        "application/json.",
    ),
    410: (422, "You may send at most 500 messages in a batch."),
    411: (422, "Forbidden attachment type."),
    412: (422, "Your account is pending approval: you may only send to your own domain."),
    413: (422, "Your account may not send."),
    429: (429, "Rate limit exceeded: slow down."),
}
# Error names that are bare HTTP answers, not API error codes.
HTTP_ERRORS = {
    "http_413": (413, "Request Entity Too Large"),
    "http_500": (500, "Internal Server Error"),
    "http_503": (503, "Service Unavailable"),
}


def error_response(code: int, to: str = "", sender: str = "", message: str = "") -> Response:
    status, text = ERRORS.get(code, (422, "Error {code}"))
    body = {"ErrorCode": code, "Message": message or text.format(to=to, sender=sender, code=code)}
    return JSONResponse(body, status_code=status)


class PostmarkSimulator:
    def __init__(self, sim: Simulator) -> None:
        self.state: ProviderState = sim.new_state(NAME)
        self.state.error_names = ERROR_NAMES
        config = sim.config
        self.token = config.postmark_server_token
        self.senders = {sender.lower() for sender in config.postmark_senders}
        self.events = PostmarkEvents(
            self.state,
            config.postmark_events_url(),
            config.postmark_webhook_username,
            config.postmark_webhook_password,
        )

    def routes(self) -> list[BaseRoute]:
        return [Route("/email", self.email, methods=["POST"])]

    async def email(self, request: Request) -> Response:
        token = request.headers.get(TOKEN_HEADER)
        if not token:
            return error_response(
                10,
                message="No Account or Server API tokens were supplied in the HTTP headers. "
                "Please add a header for either X-Postmark-Server-Token or "
                "X-Postmark-Account-Token.",
            )
        if not hmac.compare_digest(token.encode(), self.token.encode()):
            return error_response(10)
        if "json" not in request.headers.get("content-type", "").lower():
            return error_response(409)
        raw = await request.body()
        if len(raw) > MAX_BODY:
            return _http(*HTTP_ERRORS["http_413"])
        try:
            body: Any = json.loads(raw)
        except ValueError:
            return error_response(402)
        refusal = self._invalid(body)
        return refusal if refusal is not None else await self._deliver(body)

    def _invalid(self, body: Any) -> Response | None:
        """Postmark's answer to a request it will not take, or None."""
        if not isinstance(body, dict) or any(
            not isinstance(body.get(k), str | None) for k in _STRINGS
        ):
            return error_response(403)
        sender = parseaddr(body.get("From") or "")[1]
        if not sender:
            return error_response(300, message=f"Invalid 'From' address: '{body.get('From')}'.")
        if not self._signed(sender):
            return error_response(400, sender=sender)
        to = body.get("To") or ""
        if not to:
            return error_response(300, message="Zero recipients specified")
        if not _EMAIL.fullmatch(parseaddr(to)[1]):
            return error_response(
                300,
                message=f"Error parsing 'To': Illegal email address '{to}'. "
                "It must contain the '@' symbol.",
            )
        if not body.get("TextBody") and not body.get("HtmlBody"):
            return error_response(300, message="Provide either email TextBody or HtmlBody or both.")
        if not isinstance(body.get("Metadata") or {}, dict):
            return error_response(403)
        if not isinstance(body.get("Headers") or [], list):
            return error_response(403)
        return None

    async def _deliver(self, body: dict[str, Any]) -> Response:
        to = parseaddr(body["To"])[1]
        admission = await self.state.admit(to)
        if admission == OUTAGE:
            return _http(*HTTP_ERRORS["http_503"])
        if admission == RATE_LIMITED:
            return error_response(429)
        if admission != OK:
            return _refusal(admission, to)
        if to.lower() in self.events.inactive:
            return error_response(406, to=to)
        key = (body.get("Metadata") or {}).get(DELIVERY_METADATA)
        key = str(key) if key is not None else None
        first = self.state.first_answer(key)
        self.state.record(to, key, body)
        if first is not None:
            return JSONResponse(first)
        answer = {
            "To": body["To"],
            "SubmittedAt": datetime.now(UTC).isoformat(),
            "MessageID": str(uuid.uuid4()),
            "ErrorCode": 0,
            "Message": "OK",
        }
        if key is not None:
            self.state.answers.setdefault(key, answer)
        self.events.accepted(to, answer["MessageID"], body)
        return JSONResponse(answer)

    async def close(self) -> None:
        await self.events.reporter.close()

    def _signed(self, sender: str) -> bool:
        """A sender signature of the server: the address itself, or its verified domain."""
        sender = sender.lower()
        return sender in self.senders or sender.rpartition("@")[2] in self.senders


def _refusal(name: str, to: str) -> Response:
    """The answer for a scripted or random error name: an API error code or an HTTP one."""
    if name in HTTP_ERRORS:
        return _http(*HTTP_ERRORS[name])
    if name.isdigit():
        return error_response(int(name), to=to, sender="")
    return error_response(300, message=name)


def _http(status: int, text: str) -> Response:
    return PlainTextResponse(text, status_code=status)


# The error names this provider answers as documented (the control API refuses others).
ERROR_NAMES = ErrorNames(
    frozenset(map(str, ERRORS)) | frozenset(HTTP_ERRORS),
    r"\d{1,4}",
    "any other Postmark API error code (a number: ErrorCode, HTTP 422)",
)
KNOWN_ERRORS[NAME] = ERROR_NAMES
HTTP_PROVIDERS[NAME] = PostmarkSimulator
