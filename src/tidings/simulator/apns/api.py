"""Simulated Apple Push Notification service (HTTP/2, token authentication).

At construction it writes a P-256 ``.p8`` key into the credentials directory; ``account()``
gives the settings of the matching APNs account. Requests must arrive over HTTP/2 and carry
a provider JWT signed with that key; headers and payload are checked with Apple's 400
reasons. The simulator's ``clock`` is replaceable so a test can age tokens without waiting.

Two ways in, one handler (``handle``):

- h2c (HTTP/2 cleartext, prior knowledge) on the simulator's HTTP port, served by Hypercorn;
- TLS with ALPN ``h2`` on a port of its own, as Apple serves it, spoken with the ``h2``
  library because only there can the server send what Apple sends when it closes a
  connection: a GOAWAY frame whose debug data is ``{"reason": "Shutdown"}`` (``go_away``,
  and on ``stop``).

Paths under ``/sandbox`` are the development environment (Apple's
api.sandbox.push.apple.com); the others are production. A token belongs to one of them.

It is a second, independent reading of Apple's documentation: it imports nothing from
tidings' adapters, so a misreading there is not copied into the check that should catch it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import ssl
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import jwt
from cryptography.hazmat.primitives.asymmetric import ec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from tidings.simulator.behaviour import OK, OUTAGE, RATE_LIMITED, ErrorNames
from tidings.simulator.keyfiles import pkcs8_pem, write_secret
from tidings.simulator.selfsigned import self_signed
from tidings.simulator.server import HTTP_PROVIDERS, KNOWN_ERRORS, SERVERS

if TYPE_CHECKING:
    from tidings.simulator.server import Simulator

# Apple's documentation (developer.apple.com/documentation/usernotifications), written down
# here on its own. "Sending notification requests to APNs": the payload and header limits.
PAYLOAD_LIMIT = 4096  # bytes, a regular (not VoIP) notification
COLLAPSE_ID_LIMIT = 64  # bytes
PRIORITIES = frozenset({"10", "5", "1"})
# "Establishing a token-based connection to APNs": a provider token is refused after an
# hour, and may be replaced at most once every 20 minutes (on one connection).
TOKEN_MAX_AGE = 3600
TOKEN_UPDATE_INTERVAL = 20 * 60
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


def _statuses(status: int, *reasons: str) -> dict[str, int]:
    return dict.fromkeys(reasons, status)


# "Handling notification responses from APNs": every reason with its HTTP status (what a
# scripted error name answers).
STATUS: dict[str, int] = (
    _statuses(
        400,
        "BadCollapseId",
        "BadDeviceToken",
        "BadExpirationDate",
        "BadMessageId",
        "BadPriority",
        "BadTopic",
        "DeviceTokenNotForTopic",
        "DuplicateHeaders",
        "IdleTimeout",
        "InvalidPushType",
        "MissingDeviceToken",
        "MissingTopic",
        "PayloadEmpty",
        "TopicDisallowed",
    )
    | _statuses(
        403,
        "BadCertificate",
        "BadCertificateEnvironment",
        "ExpiredProviderToken",
        "Forbidden",
        "InvalidProviderToken",
        "MissingProviderToken",
        "UnrelatedKeyIdInToken",
        "BadEnvironmentKeyIdInToken",
    )
    | _statuses(404, "BadPath")
    | _statuses(405, "MethodNotAllowed")
    | _statuses(410, "ExpiredToken", "Unregistered")  # with a timestamp
    | _statuses(413, "PayloadTooLarge")
    | _statuses(429, "TooManyProviderTokenUpdates", "TooManyRequests")
    | _statuses(500, "InternalServerError")
    | _statuses(503, "ServiceUnavailable", "Shutdown")
)
SANDBOX_PREFIX = "/sandbox"  # stands for Apple's sandbox host
SANDBOX_HOSTS = frozenset({"api.sandbox.push.apple.com", "api.development.push.apple.com"})
DEVICE_PATH = "/3/device/"
JSON_HEADERS = {"content-type": "application/json"}
# How long a closing connection waits for the client's TLS close_notify: an idle client
# (a pooled connection nobody reads) never sends it, and asyncio would wait 30 seconds.
TLS_CLOSE_WAIT = 0.25


@dataclass(frozen=True)
class PushRequest:
    """One request, as either way in received it."""

    method: str
    path: str
    headers: list[tuple[str, str]]  # lower-case names, in order, repeats kept
    body: bytes
    http_version: str
    connection: Any  # the client's address: provider tokens are tracked per connection

    def header(self, name: str, default: str = "") -> str:
        return next((value for key, value in self.headers if key == name), default)


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""


@dataclass
class ConnectionToken:
    jwt: str
    iat: int


class ApnsSimulator:
    def __init__(self, sim: Simulator) -> None:
        self.state = sim.new_state("apns")
        self.state.error_names = ERROR_NAMES
        push = sim.config.push
        self.team_id = push.apns_team_id
        self.key_id = push.apns_key_id
        self.topic = push.apns_topic
        self.clock: Callable[[], float] = time.time
        self._key = ec.generate_private_key(ec.SECP256R1())
        self.key_path = sim.config.credentials_dir / f"AuthKey_{self.key_id}.p8"
        self._write_key()
        self.sandbox_tokens: set[str] = set(push.apns_sandbox_tokens)
        # Tokens APNs knows are no longer valid -> since when (seconds): 410 Unregistered.
        self.unregistered: dict[str, float] = {}
        # Every distinct provider JWT seen, in order, with its iat.
        self.jwts: dict[str, int] = {}
        self.http_versions: Counter[str] = Counter()  # requests per HTTP version
        self._connections: dict[Any, ConnectionToken] = {}
        self._sim = sim
        self.tls = TlsListener(self, sim, push.apns_tls_port)

    @property
    def cert_file(self) -> Path | None:
        """The TLS listener's self-signed certificate: trust it as the account's ca_file."""
        return self.tls.cert_file

    def account(
        self, *, tls: bool = False, sandbox: bool = False, **overrides: Any
    ) -> dict[str, Any]:
        """The settings of an APNs account pointed at this simulator, for
        ``ApnsAccount.model_validate``: h2c on the HTTP port, or TLS (``tls=True``, once
        started); the production endpoint, or the sandbox one."""
        url = self.tls.url if tls else self._sim.url
        settings: dict[str, Any] = {
            "kind": "apns",
            "team_id": self.team_id,
            "key_id": self.key_id,
            "private_key_file": self.key_path,
            "topic": self.topic,
            "base_url": url + (SANDBOX_PREFIX if sandbox else ""),
        }
        if tls:
            settings["ca_file"] = self.cert_file
        return settings | overrides

    def unregister(self, token: str, at: float | None = None) -> None:
        """From now on ``token`` is answered 410 Unregistered, with ``at`` (default: now) as
        the last time APNs confirmed it was no longer valid."""
        self.unregistered[token] = self.clock() if at is None else at

    async def go_away(self, reason: str = "Shutdown") -> int:
        """Close every TLS connection as Apple does: a GOAWAY with ``{"reason": reason}``
        (requests already received are answered first). The number of connections closed."""
        return await self.tls.go_away(reason)

    def routes(self) -> list[BaseRoute]:
        methods = ["GET", "POST", "PUT", "DELETE", "PATCH"]
        return [
            Route(f"{prefix}{DEVICE_PATH}{tail}", self._over_hypercorn, methods=methods)
            for prefix in ("", SANDBOX_PREFIX)
            for tail in ("", "{token}")
        ]

    def _write_key(self) -> None:
        write_secret(self.key_path, pkcs8_pem(self._key))

    async def _over_hypercorn(self, request: Request) -> Response:
        # Read the whole body before answering: Hypercorn's HTTP/2 stream breaks the
        # connection when DATA frames arrive for a stream already answered.
        body = await request.body()
        push = PushRequest(
            method=request.method,
            path=request.url.path,
            headers=[(name.lower(), value) for name, value in request.headers.items()],
            body=body,
            http_version=str(request.scope.get("http_version")),
            connection=request.scope.get("client"),
        )
        answer = await self.handle(push)
        return Response(answer.body, status_code=answer.status, headers=answer.headers)

    # The handler both ways in share.

    async def handle(self, request: PushRequest) -> Answer:
        """The answer to ``request``, with the ``apns-id`` APNs puts on every answer: the
        request's own when it is a valid one, else one it made up."""
        answer = await self._answer(request)
        if "apns-id" in answer.headers:
            return answer
        sent = request.header("apns-id").lower()
        apns_id = sent if APNS_ID.fullmatch(sent) else str(uuid.uuid4())
        return Answer(answer.status, answer.headers | {"apns-id": apns_id}, answer.body)

    async def _answer(self, request: PushRequest) -> Answer:
        self.http_versions[request.http_version] += 1
        if request.http_version != "2":
            # Apple's servers speak only HTTP/2; a 1.1 client gets nowhere.
            return _json(505, {"reason": "HTTP/2 required"})
        sandbox, device = _target(request.path)
        # Apple's hosts name the environment; the simulator's one host, the /sandbox path.
        sandbox = sandbox or _host(request) in SANDBOX_HOSTS
        if device is None:
            return _reason("BadPath")
        if request.method != "POST":
            return _reason("MethodNotAllowed")
        if not device:
            return _reason("MissingDeviceToken")
        refused = self._authenticate(request)
        if refused is not None:
            return refused
        # A token of the other environment is as unknown as a malformed one (Apple).
        if not DEVICE_TOKEN.fullmatch(device) or (device in self.sandbox_tokens) != sandbox:
            return _reason("BadDeviceToken")
        admission = await self.state.admit(device)
        if admission != OK:
            return self._admission_answer(admission)
        invalid = self._invalid_headers(request) or _invalid_payload(request)
        if invalid is not None:
            return invalid
        if device in self.unregistered:
            return self._gone("Unregistered", self.unregistered[device])
        return self._accept(request, device, sandbox)

    def _authenticate(self, request: PushRequest) -> Answer | None:
        scheme, _, token = request.header("authorization").partition(" ")
        if scheme.lower() != "bearer" or not token:
            return _reason("MissingProviderToken")
        iat = self._verified_iat(token)
        if iat is None:
            return _reason("InvalidProviderToken")
        if self.clock() - iat > TOKEN_MAX_AGE:
            return _reason("ExpiredProviderToken")
        self.jwts.setdefault(token, iat)
        return self._track_connection(request.connection, token, iat)

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

    def _track_connection(self, client: Any, token: str, iat: int) -> Answer | None:
        """Apple allows a new token on one connection at most every 20 minutes."""
        previous = self._connections.get(client)
        if previous is not None and previous.jwt != token and iat > previous.iat:
            if iat - previous.iat < TOKEN_UPDATE_INTERVAL:
                return _reason("TooManyProviderTokenUpdates")
        if previous is None or iat > previous.iat:
            self._connections[client] = ConnectionToken(token, iat)
        return None

    def forget_connection(self, client: Any) -> None:
        self._connections.pop(client, None)

    def _admission_answer(self, admission: str) -> Answer:
        if admission == OUTAGE:
            return _reason("ServiceUnavailable")
        if admission == RATE_LIMITED:
            return _reason("TooManyRequests")
        if admission in ("Unregistered", "ExpiredToken"):
            return self._gone(admission, self.clock())  # scripted: confirmed just now
        return _reason(admission if admission in STATUS else "InternalServerError")

    def _gone(self, reason: str, since: float) -> Answer:
        """410, with the last time APNs confirmed the token invalid, in milliseconds."""
        return _json(410, {"reason": reason, "timestamp": int(since * 1000)})

    def _invalid_headers(self, request: PushRequest) -> Answer | None:
        names = [name for name, _ in request.headers if name.startswith("apns-")]
        if len(names) != len(set(names)):
            return _reason("DuplicateHeaders")
        topic = request.header("apns-topic")
        if not topic:
            return _reason("MissingTopic")
        if topic != self.topic and not topic.startswith(self.topic + "."):
            return _reason("TopicDisallowed")
        push_type = request.header("apns-push-type", "alert")
        if push_type not in PUSH_TYPES:
            return _reason("InvalidPushType")
        priority = request.header("apns-priority", "10")
        if priority not in PRIORITIES or (push_type == "background" and priority == "10"):
            return _reason("BadPriority")
        if not request.header("apns-expiration", "0").isdigit():
            return _reason("BadExpirationDate")
        if len(request.header("apns-collapse-id").encode()) > COLLAPSE_ID_LIMIT:
            return _reason("BadCollapseId")
        if not APNS_ID.fullmatch(request.header("apns-id", str(uuid.uuid4())).lower()):
            return _reason("BadMessageId")
        return None

    def _accept(self, request: PushRequest, device: str, sandbox: bool) -> Answer:
        """200 with the apns-id. APNs has no idempotency key: a repeated apns-id is one
        more notification (counted as a duplicate by the delivery id it carries)."""
        sent_id = request.header("apns-id").lower()
        apns_id = sent_id or str(uuid.uuid4())
        payload = {
            "headers": {k: v for k, v in request.headers if k.startswith("apns-")},
            "body": json.loads(request.body),
            "http_version": request.http_version,
            "environment": "sandbox" if sandbox else "production",
        }
        self.state.record(device, sent_id or None, payload)
        return Answer(200, {"apns-id": apns_id})


def _host(request: PushRequest) -> str:
    """The host a request names (its ``host``, or ``:authority``), without the port."""
    host = request.header("host")
    return host.rpartition(":")[0] if host.count(":") == 1 else host


def _target(path: str) -> tuple[bool, str | None]:
    """(sandbox, device token) of a request path; None for a path that is not APNs'."""
    path = path.partition("?")[0]
    sandbox = path.startswith(SANDBOX_PREFIX + "/")
    rest = path.removeprefix(SANDBOX_PREFIX) if sandbox else path
    if not rest.startswith(DEVICE_PATH):
        return sandbox, None
    return sandbox, rest.removeprefix(DEVICE_PATH)


def _invalid_payload(request: PushRequest) -> Answer | None:
    body = request.body
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
    push_type = request.header("apns-push-type", "alert")
    if push_type == "alert" and not visible:
        return _reason("InvalidPushType")
    if push_type == "background" and (visible or aps.get("content-available") != 1):
        return _reason("InvalidPushType")
    return None


def _json(status: int, body: dict[str, Any]) -> Answer:
    return Answer(status, JSON_HEADERS, json.dumps(body).encode())


def _reason(reason: str) -> Answer:
    return _json(STATUS[reason], {"reason": reason})


class TlsListener:
    """APNs as Apple serves it: TLS 1.2 or later, HTTP/2 agreed by ALPN (a client that does
    not offer h2 is disconnected), the self-signed certificate ``apns-cert.pem``."""

    def __init__(self, apns: ApnsSimulator, sim: Simulator, port: int) -> None:
        self._apns = apns
        self.state = apns.state
        # The certificate must name the address clients connect to (not a wildcard).
        bound = sim.config.host
        self.host = "127.0.0.1" if bound in ("", "0.0.0.0", "::") else bound
        self._bind = bound
        self.port = port
        self._credentials_dir = sim.config.credentials_dir
        self.cert_file: Path | None = None
        self._server: asyncio.Server | None = None
        self._live: set[Http2Connection] = set()

    @property
    def url(self) -> str:
        assert self._server is not None, "the APNs TLS listener is not started"
        return f"https://{self.host}:{self.port}"

    async def start(self) -> None:
        self.cert_file, key_file = self_signed(self._credentials_dir, "apns", self.host)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(self.cert_file, key_file)
        # http/1.1 is listed only to tell a client that offers it alone (refused) from one
        # that offers nothing, as aioapns: that one speaks h2 at once, and Apple takes it.
        context.set_alpn_protocols(["h2", "http/1.1"])
        self._server = await asyncio.start_server(self._serve, self._bind, self.port, ssl=context)
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def stop(self) -> None:
        """Stop listening; then every open connection gets GOAWAY Shutdown, as from Apple."""
        if self._server is None:
            return
        self._server.close()
        await self.go_away("Shutdown")
        await self._server.wait_closed()
        self._server = None

    async def go_away(self, reason: str) -> int:
        live = list(self._live)
        await asyncio.gather(*(connection.go_away(reason) for connection in live))
        return len(live)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        ssl_object = writer.get_extra_info("ssl_object")
        alpn = ssl_object.selected_alpn_protocol() if ssl_object is not None else "none"
        if alpn not in ("h2", None):
            self.state.counts["refused_without_h2"] += 1
            writer.close()
            return
        self.state.counts["tls_connections"] += 1
        if alpn is None:
            self.state.counts["tls_without_alpn"] += 1
        connection = Http2Connection(self._apns, reader, writer)
        self._live.add(connection)
        try:
            await connection.run()
        except (OSError, ssl.SSLError):
            pass  # the client went away
        finally:
            self._live.discard(connection)
            self._apns.forget_connection(connection.peer)
            await connection.close()


class Http2Connection:
    """One client connection to the TLS listener, spoken with the h2 library. Each request
    is answered in a task of its own, so a slow answer (latency) does not hold up others."""

    def __init__(
        self, apns: ApnsSimulator, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self._apns = apns
        self._reader = reader
        self._writer = writer
        self.peer = writer.get_extra_info("peername")
        config = h2.config.H2Configuration(client_side=False, header_encoding="utf-8")
        self._h2 = h2.connection.H2Connection(config=config)
        self._requests: dict[int, tuple[list[tuple[str, str]], bytearray]] = {}
        self._answering: set[asyncio.Task[None]] = set()
        self._going_away = False

    async def run(self) -> None:
        self._h2.initiate_connection()
        self._flush()
        while not self._going_away:
            data = await self._reader.read(65536)
            if not data:
                return
            try:
                events = self._h2.receive_data(data)
            except h2.exceptions.ProtocolError:
                self._flush()
                return
            for event in events:
                self._on(event)
            self._flush()

    def _on(self, event: h2.events.Event) -> None:
        if isinstance(event, h2.events.RequestReceived):
            headers = [(str(k), str(v)) for k, v in event.headers or []]
            self._requests[event.stream_id] = (headers, bytearray())
        elif isinstance(event, h2.events.DataReceived):
            if event.stream_id in self._requests and event.data:
                self._requests[event.stream_id][1].extend(event.data)
            self._h2.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
        elif isinstance(event, h2.events.StreamEnded) and event.stream_id in self._requests:
            task = asyncio.create_task(self._answer(event.stream_id))
            self._answering.add(task)
            task.add_done_callback(self._answering.discard)
        elif isinstance(event, h2.events.StreamReset):
            self._requests.pop(event.stream_id, None)
        elif isinstance(event, h2.events.ConnectionTerminated):
            self._going_away = True

    async def _answer(self, stream_id: int) -> None:
        headers, body = self._requests.pop(stream_id)
        pseudo = {name: value for name, value in headers if name.startswith(":")}
        request = PushRequest(
            method=pseudo.get(":method", ""),
            path=pseudo.get(":path", ""),
            headers=[
                *([("host", pseudo[":authority"])] if ":authority" in pseudo else []),
                *((name, value) for name, value in headers if not name.startswith(":")),
            ],
            body=bytes(body),
            http_version="2",
            connection=self.peer,
        )
        answer = await self._apns.handle(request)
        response = [(":status", str(answer.status)), *answer.headers.items()]
        if answer.body:
            response.append(("content-length", str(len(answer.body))))
        try:
            self._h2.send_headers(stream_id, response, end_stream=not answer.body)
            if answer.body:
                self._h2.send_data(stream_id, answer.body, end_stream=True)
        except h2.exceptions.H2Error:
            return  # the client reset the stream, or the connection is closed
        self._flush()

    async def go_away(self, reason: str) -> None:
        """GOAWAY naming the last request received; those are still answered, then the
        connection is closed."""
        if self._going_away:
            return
        self._going_away = True
        with contextlib.suppress(h2.exceptions.H2Error):
            self._h2.close_connection(additional_data=json.dumps({"reason": reason}).encode())
        self._flush()
        if self._answering:
            await asyncio.wait(set(self._answering))
        await self.close()

    async def close(self) -> None:
        self._going_away = True
        if not self._writer.is_closing():
            self._writer.close()  # sends what is buffered (the GOAWAY), then close_notify
        try:
            await asyncio.wait_for(self._writer.wait_closed(), TLS_CLOSE_WAIT)
        except TimeoutError:
            self._writer.transport.abort()
        except (OSError, ssl.SSLError):
            pass

    def _flush(self) -> None:
        data = self._h2.data_to_send()
        if data and not self._writer.is_closing():
            self._writer.write(data)


def _tls_listener(sim: Simulator) -> TlsListener:
    """The simulator's TLS way in, a listener of its own (started and stopped with the
    others: ``sim.servers["apns"]``)."""
    apns = sim.http["apns"]
    assert isinstance(apns, ApnsSimulator)
    return apns.tls


# The error names this provider answers as documented (the control API refuses others).
ERROR_NAMES = ErrorNames(frozenset(STATUS))
KNOWN_ERRORS["apns"] = ERROR_NAMES
HTTP_PROVIDERS["apns"] = ApnsSimulator
SERVERS["apns"] = _tls_listener
