"""Simulated Vonage Messages API (SMS): ``POST /v1/messages``.

Checks the credentials as Vonage does (HTTP Basic with the API key and secret, or an
application JWT: RS256 signed with the application's private key, which the simulator writes
to ``vonage-application.key`` in the credentials directory, with ``application_id``,
``iat``, ``jti`` and an ``exp`` in the future), then the body (``message_type`` text,
``channel`` sms, ``to`` of 7 to 15 digits without a +, a ``from``, a ``text`` of at most
1000 characters, a ``client_ref`` of at most 100). Answers 202 ``{"message_uuid"}`` or an
RFC 7807 problem. Like Vonage it has no idempotency key: a repeat is a second SMS, counted
as a duplicate when it carries the same ``client_ref``. After accepting, it posts signed
status webhooks (``reports.py``).

A reading of Vonage's documentation of its own: nothing here comes from tidings' adapter.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
import re
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jwt
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from tidings.simulator.behaviour import OK, OUTAGE, RATE_LIMITED, ErrorNames
from tidings.simulator.keyfiles import pkcs8_pem, write_secret
from tidings.simulator.keys import rsa_key
from tidings.simulator.server import HTTP_PROVIDERS, KNOWN_ERRORS
from tidings.simulator.vonage.reports import VonageReports

if TYPE_CHECKING:
    from tidings.simulator.server import Simulator

NAME = "vonage"
ERRORS_URL = "https://developer.vonage.com/api-errors"
NUMBER = re.compile(r"[1-9][0-9]{6,14}")
MAX_TEXT = 1000
MAX_CLIENT_REF = 100
JWT_LEEWAY = 30  # seconds of clock skew allowed on iat

# Error name -> (status, type, title, detail): the problems the Messages API documents.
PROBLEMS: dict[str, tuple[int, str, str, str]] = {
    "401": (
        401,
        f"{ERRORS_URL}#unauthorized",
        "Unauthorized",
        "You did not provide correct credentials.",
    ),
    "402": (
        402,
        f"{ERRORS_URL}/#low-balance",
        "Low balance",
        "This request could not be performed due to your account balance being low.",
    ),
    "403": (
        403,
        f"{ERRORS_URL}#forbidden",
        "Forbidden",
        "Your account does not have permission to perform this action",
    ),
    "422": (
        422,
        f"{ERRORS_URL}/messages#1020",
        "Invalid params",
        "The value of one or more parameters is invalid.",
    ),
    "429": (
        429,
        f"{ERRORS_URL}/messages#1000",
        "Rate Limit Hit",
        "Please wait, then retry your request",
    ),
    "500": (
        500,
        f"{ERRORS_URL}/messages#1030",
        "Internal error",
        "There was an error processing your request in the Platform.",
    ),
    "503": (503, f"{ERRORS_URL}/messages#1100", "Service Unavailable", "Please retry later."),
}
INVALID_JSON = (
    400,
    f"{ERRORS_URL}#invalid-json",
    "The request body did not contain valid JSON",
    "Malformed JSON",
)


def problem(name: str, invalid: list[dict[str, str]] | None = None) -> JSONResponse:
    """The RFC 7807 answer for error ``name`` (an unknown name: 500)."""
    status, kind, title, detail = PROBLEMS.get(name, PROBLEMS["500"])
    if name == "400":
        status, kind, title, detail = INVALID_JSON
    body: dict[str, Any] = {
        "type": kind,
        "title": title,
        "detail": detail,
        "instance": uuid.uuid4().hex,
    }
    if invalid:
        body["invalid_parameters"] = invalid
    return JSONResponse(body, status_code=status, media_type="application/problem+json")


class VonageSimulator:
    def __init__(self, sim: Simulator) -> None:
        self.state = sim.new_state(NAME)
        self.state.error_names = ERROR_NAMES
        config = sim.config
        self._sim = sim
        self.api_key = config.vonage_api_key
        self.api_secret = config.vonage_api_secret
        self.application_id = config.vonage_application_id
        self._key = rsa_key()
        self.key_path: Path = config.credentials_dir / "vonage-application.key"
        write_secret(self.key_path, pkcs8_pem(self._key))
        self.reports = VonageReports(
            self.state,
            config.vonage_signature_secret,
            self.api_key,
            self.application_id,
            config.vonage_status_webhook_url(),
        )

    def account(self, *, jwt_auth: bool = False, **overrides: Any) -> dict[str, Any]:
        """Settings of a tidings Vonage account pointed at this simulator: Basic auth, or
        the application JWT (``jwt_auth=True``)."""
        settings: dict[str, Any] = {
            "kind": "vonage",
            "sender": "447700900001",
            "base_url": self._sim.url,
            "signature_secret": self.reports.signature_secret,
        }
        if jwt_auth:
            settings |= {"application_id": self.application_id, "private_key_file": self.key_path}
        else:
            settings |= {"api_key": self.api_key, "api_secret": self.api_secret}
        return settings | overrides

    def routes(self) -> list[BaseRoute]:
        return [Route("/v1/messages", self.send, methods=["POST"])]

    async def close(self) -> None:
        await self.reports.reporter.close()

    async def send(self, request: Request) -> Response:
        if not self._authenticated(request.headers.get("authorization", "")):
            return problem("401")
        try:
            body = json.loads(await request.body())
        except ValueError:
            return problem("400")
        if not isinstance(body, dict):
            return problem("400")
        invalid = _invalid(body)
        if invalid:
            return problem("422", invalid)
        to = str(body["to"])
        admission = await self.state.admit(to)
        if admission != OK:
            return _refusal(admission, to)
        key = body.get("client_ref")
        first = self.state.first_answer(key)
        self.state.record(to, key, body)
        if first is not None:
            return JSONResponse(first, status_code=202)
        answer = {"message_uuid": str(uuid.uuid4())}
        if key is not None:
            self.state.answers.setdefault(key, answer)
        self.reports.accepted(answer["message_uuid"], body)
        return JSONResponse(answer, status_code=202)

    def _authenticated(self, header: str) -> bool:
        scheme, _, credentials = header.partition(" ")
        if scheme.lower() == "basic":
            return self._basic(credentials.strip())
        if scheme.lower() == "bearer":
            return self._application_jwt(credentials.strip())
        return False

    def _basic(self, encoded: str) -> bool:
        try:
            user, _, password = base64.b64decode(encoded, validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return False
        return hmac.compare_digest(user, self.api_key) and hmac.compare_digest(
            password.encode(), self.api_secret.encode()
        )

    def _application_jwt(self, token: str) -> bool:
        try:
            claims = jwt.decode(
                token,
                self._key.public_key(),
                algorithms=["RS256"],
                options={"require": ["application_id", "iat", "jti", "exp"]},
                leeway=JWT_LEEWAY,
            )
        except jwt.PyJWTError:
            return False
        self.state.counts["jwt_requests"] += 1
        issued = claims["iat"]
        return claims["application_id"] == self.application_id and (
            isinstance(issued, int | float) and issued <= time.time() + JWT_LEEWAY
        )


def _invalid(body: dict[str, Any]) -> list[dict[str, str]]:
    """The parameters Vonage would refuse, each as ``{"name", "reason"}``."""
    found: list[dict[str, str]] = []
    checks = (
        ("message_type", body.get("message_type") == "text", "must be text"),
        ("channel", body.get("channel") == "sms", "must be sms"),
        ("to", isinstance(body.get("to"), str) and NUMBER.fullmatch(body["to"]), "Invalid number"),
        ("from", isinstance(body.get("from"), str) and 0 < len(body["from"]) <= 15, "required"),
        ("text", _text_ok(body.get("text")), f"1 to {MAX_TEXT} characters"),
        ("client_ref", _ref_ok(body.get("client_ref")), f"up to {MAX_CLIENT_REF} characters"),
    )
    for name, ok, reason in checks:
        if not ok:
            found.append({"name": name, "reason": reason})
    return found


def _text_ok(value: Any) -> bool:
    return isinstance(value, str) and 0 < len(value) <= MAX_TEXT


def _ref_ok(value: Any) -> bool:
    return value is None or (isinstance(value, str) and len(value) <= MAX_CLIENT_REF)


def _refusal(admission: str, to: str) -> Response:
    if admission == OUTAGE:
        return problem("503")
    if admission == RATE_LIMITED:
        return problem("429")
    if admission == "invalid_number":
        return problem("422", [{"name": "to", "reason": f"Invalid number {to}"}])
    return problem(admission)


# The error names this provider answers as documented (the control API refuses others).
ERROR_NAMES = ErrorNames(frozenset(PROBLEMS) | {"invalid_number"})
KNOWN_ERRORS[NAME] = ERROR_NAMES
HTTP_PROVIDERS[NAME] = VonageSimulator
