"""Simulated Twilio Messages API: ``POST /2010-04-01/Accounts/{sid}/Messages.json``.

Checks HTTP Basic auth against the configured account, validates the form as Twilio does
(E.164 ``To``, a sender, a body of at most 1600 characters) and answers with Twilio's
message JSON (201) or its error JSON. Like Twilio, it has no idempotency key: a repeated
request is a second SMS. It counts it as a duplicate when both name the same delivery (the
``delivery`` parameter tidings puts in the status callback URL); with ``dedup`` on, such a
repeat gets the first answer instead. After creating a message it posts status callbacks
and the recipient's replies (``reports.py``).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hmac
import re
import secrets
from email.utils import formatdate
from typing import Any
from urllib.parse import parse_qs, parse_qsl, urlsplit

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from tidings.simulator.behaviour import OK, OUTAGE, RATE_LIMITED, ErrorNames, ProviderState
from tidings.simulator.server import HTTP_PROVIDERS, KNOWN_ERRORS, Simulator
from tidings.simulator.twilio.reports import TwilioReports
from tidings.simulator.twilio.whatsapp import PREFIX as WHATSAPP
from tidings.simulator.twilio.whatsapp import TwilioWhatsApp

NAME = "twilio"
MAX_KEPT = 100_000  # message resources kept for GET
E164 = re.compile(r"\+[1-9][0-9]{6,14}")
# GSM 03.38 basic set (plus the extension table, which takes two septets).
GSM7 = set(
    "@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !\"#¤%&'()*+,-./0123456789:;<=>?"
    "¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà"
)
GSM7_EXTENDED = set("^{}\\[~]|€\f")

# Documented errors: code -> (HTTP status, message). ``{to}`` is filled in.
ERRORS: dict[int, tuple[int, str]] = {
    20003: (401, "Authenticate"),
    20404: (404, "The requested resource was not found"),
    20429: (429, "Too Many Requests"),
    20500: (500, "Internal Server Error"),
    20503: (503, "Service Unavailable"),
    21211: (400, "The 'To' number {to} is not a valid phone number."),
    21408: (
        400,
        "Permission to send an SMS has not been enabled for the region indicated by the "
        "'To' number: {to}.",
    ),
    20008: (403, "Resource not accessible with Test Account Credentials"),
    21602: (400, "Message body is required."),
    21603: (400, "A 'From' phone number is required."),
    21604: (400, "A 'To' phone number is required."),
    21606: (
        400,
        "The 'From' phone number provided is not a valid message-capable Twilio phone number "
        "for this destination.",
    ),
    21610: (400, "Attempt to send to unsubscribed recipient"),
    21614: (400, "'To' number is not a valid mobile number"),
    21659: (400, "Invalid 'From' Number"),
    21617: (400, "The concatenated message body exceeds the 1600 character limit."),
    21654: (400, "ContentSid Required"),
    21655: (400, "The ContentSid is Invalid"),
    21656: (400, "The ContentVariables Parameter is invalid"),
    63007: (400, "Twilio could not find a Channel with the specified From address"),
}


def error_response(code: int, to: str = "") -> JSONResponse:
    status, text = ERRORS.get(code, (400, "Error {code}"))
    return JSONResponse(
        {
            "code": code,
            "message": text.format(to=to, code=code),
            "more_info": f"https://www.twilio.com/docs/errors/{code}",
            "status": status,
        },
        status_code=status,
    )


def num_segments(body: str) -> int:
    """SMS segments: GSM-7 160 (153 when concatenated), otherwise UCS-2 70 (67)."""
    if all(c in GSM7 or c in GSM7_EXTENDED for c in body):
        length = sum(2 if c in GSM7_EXTENDED else 1 for c in body)
        single, part = 160, 153
    else:
        length = sum(2 if ord(c) > 0xFFFF else 1 for c in body)  # UTF-16 code units
        single, part = 70, 67
    return 1 if length <= single else -(-length // part)


class SimulatedTwilio:
    def __init__(self, sim: Simulator) -> None:
        self.state: ProviderState = sim.new_state(NAME)
        self.state.error_names = ERROR_NAMES
        config = sim.config
        self.account_sid = config.twilio_account_sid
        self.auth_token = config.twilio_auth_token
        # Who may authenticate: the account (SID, auth token) and its API key (SK…, secret).
        self.credentials = {
            config.twilio_account_sid: config.twilio_auth_token,
            config.twilio_api_key_sid: config.twilio_api_key_secret,
        }
        self.reports = TwilioReports(
            self.state, self.account_sid, self.auth_token, config.twilio_replies_url()
        )
        self.messages: dict[str, dict[str, Any]] = {}  # SID -> the message resource
        self.whatsapp = TwilioWhatsApp(
            self.reports,
            config.twilio_whatsapp_senders,
            dict(config.twilio_contents),
            config.twilio_whatsapp_inbound_url,
        )

    def routes(self) -> list[BaseRoute]:
        return [
            Route(
                "/2010-04-01/Accounts/{sid}/Messages.json", self.create_message, methods=["POST"]
            ),
            Route(
                "/2010-04-01/Accounts/{sid}/Messages/{message_sid}.json",
                self.fetch_message,
                methods=["GET"],
            ),
        ]

    async def fetch_message(self, request: Request) -> Response:
        """A message resource as it is now (``client.messages(sid).fetch()``): 404 (code
        20404) for a SID this account never created."""
        if not self._authenticated(request):
            return error_response(20003)
        message = self.messages.get(request.path_params["message_sid"])
        if message is None:
            return error_response(20404)
        return JSONResponse(message)

    async def create_message(self, request: Request) -> Response:
        if not self._authenticated(request):
            return error_response(20003)
        form = await _form(request)
        whatsapp = form.get("To", "").startswith(WHATSAPP)
        invalid = self._whatsapp_invalid(form) if whatsapp else _invalid(form)
        if invalid is not None:
            return error_response(invalid, form.get("To", ""))
        to = form["To"]
        admission = await self.state.admit(to)
        if admission != OK:
            return _refusal(admission, to)
        if to in self.reports.opted_out:
            return error_response(21610, to)
        key = _delivery_of(form.get("StatusCallback"))
        first = self.state.first_answer(key)
        self.state.record(to, key, form)
        if first is not None:
            return JSONResponse(first, status_code=201)
        answer = self._message(form)
        if key is not None:
            self.state.answers.setdefault(key, answer)
        refused = self.whatsapp.refusal(form) if whatsapp else None
        final, code = self.reports.created(answer, form.get("StatusCallback"), refused)
        self._keep(answer, final, code)
        return JSONResponse(answer, status_code=201)

    def _keep(self, answer: dict[str, Any], final: str, code: str | None) -> None:
        """Keep the message for GET, its status moving to ``final`` when the callbacks say
        so (the oldest forgotten past ``MAX_KEPT``, to bound memory)."""
        message = dict(answer)
        self.messages[message["sid"]] = message
        while len(self.messages) > MAX_KEPT:
            del self.messages[next(iter(self.messages))]

        def settle() -> None:
            message.update(status=final, error_code=int(code) if code else None)
            message["date_updated"] = message["date_sent"] = formatdate(usegmt=True)

        delay = self.state.behaviour.report_delay_ms / 1000
        asyncio.get_running_loop().call_later(delay, settle)

    async def close(self) -> None:
        await self.reports.reporter.close()

    def _whatsapp_invalid(self, form: dict[str, str]) -> int | None:
        if not E164.fullmatch(form["To"].removeprefix(WHATSAPP)):
            return 21211
        return self.whatsapp.invalid(form)

    def _authenticated(self, request: Request) -> bool:
        """Basic auth with the configured SID and token, for the SID in the path."""
        scheme, _, encoded = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "basic":
            return False
        try:
            user, _, password = base64.b64decode(encoded, validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return False
        secret = self.credentials.get(user)
        return (
            secret is not None
            and request.path_params["sid"] == self.account_sid
            and hmac.compare_digest(password.encode(), secret.encode())
        )

    def _message(self, form: dict[str, str]) -> dict[str, Any]:
        sid = "SM" + secrets.token_hex(16)
        service = form.get("MessagingServiceSid")
        now = formatdate(usegmt=True)
        return {
            "account_sid": self.account_sid,
            "api_version": "2010-04-01",
            "body": form.get("Body", ""),
            "date_created": now,
            "date_sent": None,
            "date_updated": now,
            "direction": "outbound-api",
            "error_code": None,
            "error_message": None,
            "from": form.get("From"),
            "messaging_service_sid": service,
            "num_media": "0",
            "num_segments": str(num_segments(form.get("Body", ""))),
            "price": None,
            "price_unit": "USD",
            "sid": sid,
            "status": "accepted" if service and "From" not in form else "queued",
            "subresource_uris": {
                "media": f"/2010-04-01/Accounts/{self.account_sid}/Messages/{sid}/Media.json"
            },
            "to": form["To"],
            "uri": f"/2010-04-01/Accounts/{self.account_sid}/Messages/{sid}.json",
        }


def _delivery_of(callback: str | None) -> str | None:
    """The delivery a request names in its callback URL (tidings' ``delivery`` parameter)."""
    if not callback:
        return None
    values = parse_qs(urlsplit(callback).query).get("delivery")
    return values[0] if values else None


async def _form(request: Request) -> dict[str, str]:
    """The urlencoded body (the only encoding Twilio's API takes); the last value wins."""
    body = (await request.body()).decode("utf-8", errors="replace")
    return dict(parse_qsl(body, keep_blank_values=True))


def _invalid(form: dict[str, str]) -> int | None:
    """The Twilio error code for a malformed request, or None."""
    to = form.get("To")
    if not to:
        return 21604
    if not E164.fullmatch(to):
        return 21211
    if not form.get("From") and not form.get("MessagingServiceSid"):
        return 21603
    if not form.get("Body"):
        return 21602
    if len(form["Body"]) > 1600:
        return 21617
    return None


def _refusal(admission: str, to: str) -> Response:
    if admission == OUTAGE:
        return error_response(20503)
    if admission == RATE_LIMITED:
        return error_response(20429)
    try:
        code = int(admission)
    except ValueError:
        code = 20500
    return error_response(code, to)


# The error names this provider answers as documented (the control API refuses others).
ERROR_NAMES = ErrorNames(
    frozenset(map(str, ERRORS)),
    r"[1-9]\d{4}",
    "any other Twilio error code (five digits, e.g. 20500, 30003)",
)
KNOWN_ERRORS[NAME] = ERROR_NAMES
HTTP_PROVIDERS[NAME] = SimulatedTwilio
