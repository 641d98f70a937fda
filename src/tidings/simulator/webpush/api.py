"""A simulated Web Push service (RFC 8030), with the browsers subscribed to it.

``subscribe()`` (or ``POST /_sim/webpush/subscriptions``) plays a browser's
``pushManager.subscribe``: a fresh P-256 key pair and auth secret, an endpoint
``{url}/webpush/{id}``, restricted to an application server key (by default the VAPID key
the simulator writes to ``webpush-vapid.pem`` for tidings). ``unsubscribe`` makes the
endpoint answer 410 Gone, as a push service does once the user revoked it.

``POST /webpush/{id}`` checks, in order: a known subscription (404), a live one (410), VAPID
(401: missing; 403: an invalid JWT, ``aud`` not this origin, ``exp`` over 24 h, or a key
other than the subscription's), ``TTL`` (a whole number, 400), ``Urgency`` and ``Topic`` (400),
``Content-Encoding: aes128gcm`` (400), at most 4096 bytes (413), a body that decrypts with
the subscription's private key (400); then the behaviour. Accepted: 201 with ``Location``;
the decrypted plaintext is recorded. Errors are JSON ``{code, errno, error, message}``.
"""

from __future__ import annotations

import json
import os
import re
import time
import uuid
from dataclasses import dataclass
from http import HTTPStatus
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cryptography.hazmat.primitives.asymmetric import ec
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from tidings.simulator.behaviour import OK, OUTAGE, RATE_LIMITED, ErrorNames
from tidings.simulator.keyfiles import pkcs8_pem, write_secret
from tidings.simulator.server import HTTP_PROVIDERS, KNOWN_ERRORS
from tidings.simulator.webpush.crypto import (
    Refused,
    b64url,
    b64url_decode,
    check_vapid,
    decrypt,
    raw_public,
)

if TYPE_CHECKING:
    from tidings.simulator.server import Simulator

NAME = "webpush"
PUSH_PATH = "/webpush"
MAX_BODY = 4096
URGENCIES = frozenset({"very-low", "low", "normal", "high"})
TOPIC = re.compile(r"[A-Za-z0-9_-]{1,32}")
_DEFAULT = object()


@dataclass
class Browser:
    """One subscription, with the keys only the browser holds."""

    id: str
    endpoint: str
    private_key: ec.EllipticCurvePrivateKey
    auth: bytes
    server_key: bytes | None  # the application server key it is restricted to
    active: bool = True

    def subscription(self) -> dict[str, Any]:
        keys = {"p256dh": b64url(raw_public(self.private_key)), "auth": b64url(self.auth)}
        return {"endpoint": self.endpoint, "expirationTime": None, "keys": keys}


def error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = "Error"
    body = {
        "code": status,
        "errno": 100 + status % 100,
        "error": phrase,
        "message": message,
    }
    return JSONResponse(body, status_code=status, headers=headers)


class WebPushSimulator:
    def __init__(self, sim: Simulator) -> None:
        self.state = sim.new_state(NAME)
        self.state.error_names = ERROR_NAMES
        self._sim = sim
        self.vapid_subject = sim.config.webpush_vapid_subject
        self._vapid = ec.generate_private_key(ec.SECP256R1())
        self.vapid_key_path: Path = sim.config.credentials_dir / "webpush-vapid.pem"
        write_secret(self.vapid_key_path, pkcs8_pem(self._vapid))
        self.browsers: dict[str, Browser] = {}

    @property
    def application_server_key(self) -> str:
        """The public half of the VAPID key the simulator wrote (base64url)."""
        return b64url(raw_public(self._vapid))

    def account(self, **overrides: Any) -> dict[str, Any]:
        """Settings of a tidings Web Push account signing with the simulator's VAPID key."""
        settings = {
            "kind": "webpush",
            "vapid_private_key_file": self.vapid_key_path,
            "vapid_subject": self.vapid_subject,
            "allow_private": True,  # the push service is on loopback
            "allow_insecure": True,  # over plain http
        }
        return settings | overrides

    def subscribe(self, server_key: Any = _DEFAULT, base_url: str | None = None) -> dict[str, Any]:
        """A new browser's subscription JSON; ``server_key`` (base64url, or None for an
        unrestricted one) defaults to the simulator's VAPID key."""
        key = self.application_server_key if server_key is _DEFAULT else server_key
        browser_id = uuid.uuid4().hex
        base = (base_url or self._sim.url).rstrip("/")
        browser = Browser(
            id=browser_id,
            endpoint=f"{base}{PUSH_PATH}/{browser_id}",
            private_key=ec.generate_private_key(ec.SECP256R1()),
            auth=os.urandom(16),
            server_key=_key_bytes(key),
        )
        self.browsers[browser_id] = browser
        return browser.subscription()

    def unsubscribe(self, endpoint: str) -> None:
        """The user revoked the subscription: its endpoint answers 410 from now on."""
        self.browsers[endpoint.rstrip("/").rpartition("/")[2]].active = False

    def routes(self) -> list[BaseRoute]:
        return [
            Route(f"{PUSH_PATH}/{{browser}}", self.push, methods=["POST"]),
            Route("/_sim/webpush/subscriptions", self._subscribe, methods=["POST"]),
            Route("/_sim/webpush/subscriptions/{browser}", self._revoke, methods=["DELETE"]),
        ]

    async def push(self, request: Request) -> Response:
        browser = self.browsers.get(request.path_params["browser"])
        if browser is None:
            return error(404, "no such subscription")
        if not browser.active:
            return error(410, "the subscription has expired or was revoked")
        body = await request.body()
        try:
            checked = self._checked(request, browser, body)
        except Refused as refused:
            return error(refused.status, str(refused))
        admission = await self.state.admit(browser.endpoint)
        if admission != OK:
            return _refusal(admission)
        return self._accept(request, browser, checked)

    def _checked(self, request: Request, browser: Browser, body: bytes) -> dict[str, Any]:
        """What the request carries, once every RFC check passed; ``Refused`` otherwise."""
        origin = f"{request.url.scheme}://{request.headers.get('host', '')}"
        vapid = check_vapid(request.headers.get("authorization"), origin, time.time())
        if browser.server_key is not None and vapid.key != browser.server_key:
            raise Refused(403, "the VAPID key is not the one this subscription was made for")
        headers = _push_headers(request)
        if len(body) > MAX_BODY:
            raise Refused(413, f"the body is {len(body)} bytes, over {MAX_BODY}")
        try:
            plaintext = decrypt(body, browser.private_key, browser.auth)
        except ValueError as failure:
            raise Refused(400, f"the body does not decrypt: {failure}") from None
        return {"headers": headers, "vapid": vapid.claims, "plaintext": plaintext}

    def _accept(self, request: Request, browser: Browser, checked: dict[str, Any]) -> Response:
        text = checked["plaintext"].decode("utf-8", "replace")
        try:
            parsed: Any = json.loads(text)
        except ValueError:
            parsed = None
        key = parsed.get("delivery_id") if isinstance(parsed, dict) else None
        payload = {
            "plaintext": text,
            "json": parsed,
            "headers": checked["headers"],
            "vapid": checked["vapid"],
        }
        self.state.record(browser.endpoint, key if isinstance(key, str) else None, payload)
        message_id = uuid.uuid4().hex
        location = f"{request.url.scheme}://{request.headers.get('host')}{PUSH_PATH}/m/{message_id}"
        return Response(status_code=201, headers={"location": location})

    async def _subscribe(self, request: Request) -> Response:
        try:
            wanted: Any = json.loads(await request.body() or b"{}")
            if not isinstance(wanted, dict):
                raise ValueError("the body must be a JSON object")
            key = wanted.get("applicationServerKey", _DEFAULT)
            subscription = self.subscribe(key, base_url=str(request.base_url))
        except (ValueError, TypeError) as failure:
            return error(400, str(failure))
        return JSONResponse(subscription, status_code=201)

    async def _revoke(self, request: Request) -> Response:
        browser = self.browsers.get(request.path_params["browser"])
        if browser is None:
            return error(404, "no such subscription")
        browser.active = False
        return Response(status_code=204)


def _push_headers(request: Request) -> dict[str, Any]:
    """TTL, Urgency and Topic as RFC 8030 §5 allows them; ``Refused`` (400) otherwise."""
    ttl = request.headers.get("ttl", "")
    if not ttl.isdigit():
        raise Refused(400, "TTL must be a number of seconds")
    urgency = request.headers.get("urgency", "normal")
    if urgency not in URGENCIES:
        raise Refused(400, f"unknown Urgency {urgency!r}")
    topic = request.headers.get("topic")
    if topic is not None and not TOPIC.fullmatch(topic):
        raise Refused(400, "Topic must be 1 to 32 URL-safe base64 characters")
    if request.headers.get("content-encoding", "").lower() != "aes128gcm":
        raise Refused(400, "Content-Encoding must be aes128gcm")
    return {"ttl": int(ttl), "urgency": urgency, "topic": topic}


def _key_bytes(key: str | None) -> bytes | None:
    if key is None:
        return None
    raw = b64url_decode(key)
    ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), raw)  # ValueError if not
    return raw


def _refusal(admission: str) -> Response:
    if admission == OUTAGE:
        return error(503, "service unavailable", {"retry-after": "1"})
    if admission == RATE_LIMITED:
        return error(429, "too many requests", {"retry-after": "1"})
    try:
        status = int(admission)
    except ValueError:
        status = 500
    status = status if 400 <= status <= 599 else 500
    headers = {"retry-after": "1"} if status == 429 or status >= 500 else None
    return error(status, f"scripted {admission}", headers)


# The error names this provider answers as documented (the control API refuses others).
ERROR_NAMES = ErrorNames(frozenset(), r"[45]\d\d", "any HTTP status from 400 to 599")
KNOWN_ERRORS[NAME] = ERROR_NAMES
HTTP_PROVIDERS[NAME] = WebPushSimulator
