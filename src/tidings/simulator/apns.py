"""Simulated Apple Push Notification service (HTTP/2, token authentication).

At construction it writes a P-256 ``.p8`` key into the credentials directory; ``account()``
gives the matching ``ApnsAccount``. Requests must arrive over HTTP/2 and carry a provider
JWT signed with that key; headers and payload are checked with Apple's 400 reasons. The
simulator's ``clock`` is replaceable so a test can age tokens without waiting.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from tidings.providers.apns import (
    COLLAPSE_ID_LIMIT,
    CREDENTIAL_ERRORS,
    PAYLOAD_LIMIT,
    REQUEST_ERRORS,
    TOKEN_MIN_AGE,
    ApnsAccount,
)
from tidings.simulator.behaviour import OK, OUTAGE, RATE_LIMITED
from tidings.simulator.keyfiles import pkcs8_pem, write_secret
from tidings.simulator.server import HTTP_PROVIDERS

if TYPE_CHECKING:
    from tidings.simulator.server import Simulator

TOKEN_MAX_AGE = 3600
DEVICE_TOKEN = re.compile(r"[0-9a-fA-F]{64,200}")
APNS_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
PUSH_TYPES = frozenset(
    {
        "alert",
        "background",
        "location",
        "voip",
        "complication",
        "fileprovider",
        "mdm",
        "liveactivity",
        "pushtotalk",
        "widgets",
        "controls",
    }
)
# Every documented reason with its HTTP status (what a scripted error name answers).
STATUS: dict[str, int] = (
    dict.fromkeys(REQUEST_ERRORS - {"BadPath", "MethodNotAllowed"}, 400)
    | dict.fromkeys(CREDENTIAL_ERRORS | {"ExpiredProviderToken"}, 403)
    | {
        "BadDeviceToken": 400,
        "DeviceTokenNotForTopic": 400,
        "IdleTimeout": 400,
        "BadPath": 404,
        "MethodNotAllowed": 405,
        "Unregistered": 410,
        "ExpiredToken": 410,
        "PayloadTooLarge": 413,
        "TooManyProviderTokenUpdates": 429,
        "TooManyRequests": 429,
        "InternalServerError": 500,
        "ServiceUnavailable": 503,
        "Shutdown": 503,
    }
)


@dataclass
class ConnectionToken:
    jwt: str
    iat: int


class ApnsSimulator:
    def __init__(self, sim: Simulator) -> None:
        self.state = sim.new_state("apns")
        push = sim.config.push
        self.team_id = push.apns_team_id
        self.key_id = push.apns_key_id
        self.topic = push.apns_topic
        self.clock: Callable[[], float] = time.time
        self._key = ec.generate_private_key(ec.SECP256R1())
        self.key_path = sim.config.credentials_dir / f"AuthKey_{self.key_id}.p8"
        self._write_key()
        # Every distinct provider JWT seen, in order, with its iat.
        self.jwts: dict[str, int] = {}
        self.http_versions: Counter[str] = Counter()  # requests per HTTP version
        self._connections: dict[Any, ConnectionToken] = {}
        self._sim = sim

    def account(self, **overrides: Any) -> ApnsAccount:
        """An account pointed at this simulator."""
        settings: dict[str, Any] = {
            "team_id": self.team_id,
            "key_id": self.key_id,
            "private_key_file": self.key_path,
            "topic": self.topic,
            "base_url": self._sim.url,
        }
        return ApnsAccount.model_validate(settings | overrides)

    def routes(self) -> list[BaseRoute]:
        methods = ["GET", "POST", "PUT", "DELETE", "PATCH"]
        return [
            Route("/3/device/", self._missing_token, methods=methods),
            Route("/3/device/{token}", self._push, methods=methods),
        ]

    def _write_key(self) -> None:
        write_secret(self.key_path, pkcs8_pem(self._key))

    async def _missing_token(self, request: Request) -> Response:
        await request.body()
        return _reason("MissingDeviceToken")

    async def _push(self, request: Request) -> Response:
        # Read the whole body before answering: Hypercorn's HTTP/2 stream breaks the
        # connection when DATA frames arrive for a stream already answered.
        body = await request.body()
        self.http_versions[str(request.scope.get("http_version"))] += 1
        if request.scope.get("http_version") != "2":
            # Apple's servers speak only HTTP/2 (ALPN h2); a 1.1 client gets nowhere.
            return JSONResponse({"reason": "HTTP/2 required"}, status_code=505)
        if request.method != "POST":
            return _reason("MethodNotAllowed")
        refused = self._authenticate(request)
        if refused is not None:
            return refused
        device = request.path_params["token"]
        if not DEVICE_TOKEN.fullmatch(device):
            return _reason("BadDeviceToken")
        admission = await self.state.admit(device)
        if admission != OK:
            return self._admission_answer(admission)
        invalid = self._invalid_headers(request) or _invalid_payload(request, body)
        if invalid is not None:
            return invalid
        return self._accept(request, device, body)

    def _authenticate(self, request: Request) -> Response | None:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token:
            return _reason("MissingProviderToken")
        iat = self._verified_iat(token)
        if iat is None:
            return _reason("InvalidProviderToken")
        if self.clock() - iat > TOKEN_MAX_AGE:
            return _reason("ExpiredProviderToken")
        self.jwts.setdefault(token, iat)
        return self._track_connection(request.scope.get("client"), token, iat)

    def _verified_iat(self, token: str) -> int | None:
        """The token's iat when its kid, signature and iss check out."""
        try:
            if jwt.get_unverified_header(token).get("kid") != self.key_id:
                return None
            claims = jwt.decode(
                token,
                self._key.public_key(),
                algorithms=["ES256"],
                issuer=self.team_id,
                options={"require": ["iss", "iat"], "verify_iat": False},
            )
        except jwt.PyJWTError:
            return None
        iat = claims["iat"]
        if not isinstance(iat, int) or iat > self.clock() + 60:
            return None
        return iat

    def _track_connection(self, client: Any, token: str, iat: int) -> Response | None:
        """Apple allows a new token on one connection at most every 20 minutes."""
        previous = self._connections.get(client)
        if previous is not None and previous.jwt != token and iat > previous.iat:
            if iat - previous.iat < TOKEN_MIN_AGE:
                return _reason("TooManyProviderTokenUpdates")
        if previous is None or iat > previous.iat:
            self._connections[client] = ConnectionToken(token, iat)
        return None

    def _admission_answer(self, admission: str) -> Response:
        if admission == OUTAGE:
            return _reason("ServiceUnavailable")
        if admission == RATE_LIMITED:
            return _reason("TooManyRequests")
        if admission in ("Unregistered", "ExpiredToken"):
            timestamp = int((self.clock() - 86400) * 1000)
            return JSONResponse({"reason": admission, "timestamp": timestamp}, status_code=410)
        return _reason(admission if admission in STATUS else "InternalServerError")

    def _invalid_headers(self, request: Request) -> Response | None:
        headers = request.headers
        names = [name for name, _ in headers.items() if name.startswith("apns-")]
        if len(names) != len(set(names)):
            return _reason("DuplicateHeaders")
        topic = headers.get("apns-topic")
        if not topic:
            return _reason("MissingTopic")
        if topic != self.topic and not topic.startswith(self.topic + "."):
            return _reason("TopicDisallowed")
        push_type = headers.get("apns-push-type", "alert")
        if push_type not in PUSH_TYPES:
            return _reason("InvalidPushType")
        priority = headers.get("apns-priority", "10")
        if priority not in ("10", "5", "1") or (push_type == "background" and priority == "10"):
            return _reason("BadPriority")
        if not headers.get("apns-expiration", "0").isdigit():
            return _reason("BadExpirationDate")
        if len(headers.get("apns-collapse-id", "").encode()) > COLLAPSE_ID_LIMIT:
            return _reason("BadCollapseId")
        if not APNS_ID.fullmatch(headers.get("apns-id", str(uuid.uuid4())).lower()):
            return _reason("BadMessageId")
        return None

    def _accept(self, request: Request, device: str, body: bytes) -> Response:
        apns_id = request.headers.get("apns-id", "").lower() or str(uuid.uuid4())
        key = apns_id if self.state.behaviour.dedup else None
        payload = {
            "headers": {k: v for k, v in request.headers.items() if k.startswith("apns-")},
            "body": json.loads(body),
            "http_version": request.scope.get("http_version"),
        }
        self.state.record(device, key, payload)
        return Response(status_code=200, headers={"apns-id": apns_id})


def _invalid_payload(request: Request, body: bytes) -> Response | None:
    if not body:
        return _reason("PayloadEmpty")
    if len(body) > PAYLOAD_LIMIT:
        return _reason("PayloadTooLarge")
    try:
        payload = json.loads(body)
    except ValueError:
        payload = None
    # Apple documents no reason for a malformed body; PayloadEmpty is the nearest.
    if not isinstance(payload, dict) or not isinstance(payload.get("aps"), dict):
        return _reason("PayloadEmpty")
    aps = payload["aps"]
    visible = any(k in aps for k in ("alert", "sound", "badge"))
    push_type = request.headers.get("apns-push-type", "alert")
    if push_type == "alert" and not visible:
        return _reason("InvalidPushType")
    if push_type == "background" and (visible or aps.get("content-available") != 1):
        return _reason("InvalidPushType")
    return None


def _reason(reason: str) -> Response:
    return JSONResponse({"reason": reason}, status_code=STATUS[reason])


HTTP_PROVIDERS["apns"] = ApnsSimulator
