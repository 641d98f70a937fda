"""The simulator process: every HTTP provider on one port (HTTP/1.1 and HTTP/2 cleartext,
served by Hypercorn) plus SMTP on its own port, and a control API under ``/_sim``.

In-process use (tests, benchmarks)::

    async with Simulator(SimulatorConfig()) as sim:
        sim.url              # http://127.0.0.1:<port>
        sim.state("sendgrid").script("a@example.com", "400")
        sim.state("sendgrid").summary()
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Protocol

from hypercorn.asyncio import serve
from hypercorn.config import Config as HypercornConfig
from pydantic import BaseModel, Field, ValidationError, model_validator
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from tidings.simulator.behaviour import Behaviour, ErrorNames, ProviderState
from tidings.simulator.push_config import PushConfig
from tidings.simulator.ses.config import SesConfig


class SimulatorConfig(BaseModel):
    host: str = "127.0.0.1"
    http_port: int = Field(default=0, ge=0, le=65535)  # 0: any free port
    smtp_port: int = Field(default=0, ge=0, le=65535)
    # Where generated credentials (FCM service account, APNs key, TLS certificate) are written.
    credentials_dir: Path = Path("./simulator-credentials")
    behaviours: dict[str, Behaviour] = Field(default_factory=dict)
    seed: int = 0
    # Email (SendGrid, SMTP): the credentials the simulated providers accept, and how the
    # SMTP listener does TLS (STARTTLS required, TLS from the first byte, or none).
    sendgrid_api_key: str = "SG.simulator-key"
    smtp_username: str | None = "tidings"
    smtp_password: str = "simulator-password"
    smtp_tls: Literal["starttls", "implicit", "none"] = "starttls"
    # Where the SMTP server mails the delivery status notifications (RFC 3464) of what its
    # behaviour's reports bounce or delay, to each message's envelope sender: "host:port" of
    # tidings' bounce listener (in real life, the MX of the return path's domain). None: none.
    smtp_dsn_relay: str | None = None
    # FCM project, APNs team/key/topic and token lifetime of the simulated push providers.
    push: PushConfig = Field(default_factory=PushConfig)
    # Amazon SES: the AWS credentials it accepts, its region and SNS topic.
    ses: SesConfig = Field(default_factory=SesConfig)
    # Credentials the simulated SMS and webhook providers check (and tidings is given).
    twilio_account_sid: str = "AC0123456789abcdef0123456789abcdef"
    twilio_auth_token: str = "simulator-twilio-auth-token"
    # An API key of that account (SK…) and its secret: accepted as well as the auth token.
    twilio_api_key_sid: str = "SK0123456789abcdef0123456789abcdef"
    twilio_api_key_secret: str = "simulator-twilio-api-key-secret"
    webhook_secret: str = "whsec_dGlkaW5ncy1zaW11bGF0b3Itd2ViaG9vay1zZWNyZXQ="
    # Where the simulated SendGrid posts its Event Webhook and the simulated Twilio number
    # posts replies (STOP, HELP): set in each provider's console in real life. None: not sent,
    # unless tidings_url is set: then tidings' routes for the accounts --write-config names.
    sendgrid_event_webhook_url: str | None = None
    twilio_inbound_url: str | None = None
    tidings_url: str | None = None
    # Mailgun and Postmark: the credentials they accept, the sending domains (Mailgun) and
    # sender signatures (Postmark: addresses, or domains covering theirs) they know, and
    # where they post events (as SendGrid's URL above). Postmark sends Basic credentials.
    mailgun_api_key: str = "simulator-mailgun-api-key"
    mailgun_domains: list[str] = Field(default_factory=lambda: ["mg.example.com"])
    mailgun_webhook_signing_key: str = "simulator-mailgun-webhook-signing-key"
    mailgun_webhook_url: str | None = None
    postmark_server_token: str = "simulator-postmark-server-token"
    postmark_senders: list[str] = Field(default_factory=lambda: ["example.com"])
    postmark_webhook_url: str | None = None
    postmark_webhook_username: str = "postmark"
    postmark_webhook_password: str = "simulator-postmark-webhook-password"
    # Resend: the API key it accepts, its verified sending domains, the signing secret of its
    # (Svix) webhooks and where they go (as SendGrid's URL above).
    resend_api_key: str = "re_simulator_key"
    resend_domains: list[str] = Field(default_factory=lambda: ["example.com"])
    resend_webhook_secret: str = "whsec_c2ltdWxhdG9yLXJlc2VuZC13ZWJob29rLXNlY3JldA=="
    resend_webhook_url: str | None = None
    # The event types the Resend webhook endpoint is subscribed to (as chosen in Resend's
    # dashboard); None: all of them.
    resend_webhook_events: list[str] | None = None
    # SparkPost: the API key, its sending domains, and its webhooks' credentials (Basic, or
    # the auth_token header when sparkpost_webhook_token is set) and URL.
    sparkpost_api_key: str = "simulator-sparkpost-api-key"
    sparkpost_domains: list[str] = Field(default_factory=lambda: ["example.com"])
    sparkpost_webhook_username: str = "sparkpost"
    sparkpost_webhook_password: str = "simulator-sparkpost-webhook-password"
    sparkpost_webhook_token: str | None = None
    sparkpost_webhook_url: str | None = None

    @model_validator(mode="after")
    def _known_behaviours(self) -> SimulatorConfig:
        """Behaviours of providers the simulator has, naming errors they answer."""
        from tidings.simulator import providers  # noqa: F401  (registers the providers)

        for name, behaviour in self.behaviours.items():
            if name not in HTTP_PROVIDERS and name not in SERVERS:
                known = ", ".join(sorted({*HTTP_PROVIDERS, *SERVERS}))
                raise ValueError(f"behaviours.{name}: no such provider (known: {known})")
            names = KNOWN_ERRORS.get(name)
            unknown = names.unknown(behaviour.errors) if names else []
            if unknown:
                raise ValueError(f"behaviours.{name}.errors: unknown error names {unknown}")
        return self

    def mailgun_events_url(self) -> str | None:
        return self.mailgun_webhook_url or self._tidings("/v1/webhooks/mailgun/mailgun-sim")

    def resend_events_url(self) -> str | None:
        return self.resend_webhook_url or self._tidings("/v1/webhooks/resend/resend-sim")

    def sparkpost_events_url(self) -> str | None:
        return self.sparkpost_webhook_url or self._tidings("/v1/webhooks/sparkpost/sparkpost-sim")

    def postmark_events_url(self) -> str | None:
        return self.postmark_webhook_url or self._tidings("/v1/webhooks/postmark/postmark-sim")

    # Vonage: the API key and secret (HTTP Basic), the application whose JWTs it accepts
    # (its private key is written to the credentials directory), the signature secret its
    # status webhooks are signed with, and where they go (as SendGrid's URL above).
    vonage_api_key: str = "a1b2c3d4"
    vonage_api_secret: str = "simulator-vonage-api-secret"
    vonage_application_id: str = "aaaaaaaa-bbbb-4ccc-8ddd-0123456789ab"
    vonage_signature_secret: str = "simulator-vonage-signature-secret-0123456789"
    vonage_status_url: str | None = None
    # Web Push: the contact the simulated push service expects in VAPID JWTs (any mailto:
    # or https: URL is accepted; this one goes into --write-config).
    webpush_vapid_subject: str = "mailto:tidings@example.com"
    # Chat: the bot token the simulated Slack Web API accepts.
    slack_bot_token: str = "xoxb-simulator-bot-token"
    # The bot token the simulated Telegram Bot API accepts.
    telegram_bot_token: str = "123456789:simulator-telegram-bot-token-0123"
    # WhatsApp (Cloud API): the number id and token it accepts, its approved templates
    # ("name:language" -> body parameters), the app secret its webhooks are signed with and
    # where they go (None: not sent).
    whatsapp_phone_number_id: str = "106540352242922"
    whatsapp_access_token: str = "simulator-whatsapp-access-token"
    whatsapp_templates: dict[str, int] = Field(
        default_factory=lambda: {"order_update:en_US": 1, "order_update:pt_BR": 1}
    )
    whatsapp_app_secret: str = "simulator-whatsapp-app-secret"
    whatsapp_webhook_url: str | None = None
    # Twilio's WhatsApp senders (E.164, sent as whatsapp:+…), its approved content templates
    # (ContentSid -> how many variables), and where a user's WhatsApp message is posted.
    twilio_whatsapp_senders: tuple[str, ...] = ("+14155238886",)
    twilio_contents: dict[str, int] = {"HX0123456789abcdef0123456789abcdef": 1}
    twilio_whatsapp_inbound_url: str | None = None

    def vonage_status_webhook_url(self) -> str | None:
        return self.vonage_status_url or self._tidings("/v1/webhooks/vonage/vonage-sim")

    def sendgrid_events_url(self) -> str | None:
        return self.sendgrid_event_webhook_url or self._tidings(
            "/v1/webhooks/sendgrid/sendgrid-sim"
        )

    def twilio_replies_url(self) -> str | None:
        return self.twilio_inbound_url or self._tidings("/v1/webhooks/twilio/twilio-sim/inbound")

    def _tidings(self, path: str) -> str | None:
        return f"{self.tidings_url.rstrip('/')}{path}" if self.tidings_url else None


class SimulatedProvider(Protocol):
    """One provider's protocol: its routes, served on the simulator's HTTP port."""

    state: ProviderState

    def routes(self) -> list[BaseRoute]: ...


class SimulatedServer(Protocol):
    """A provider on its own listener (SMTP)."""

    state: ProviderState
    port: int

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


ProviderFactory = Callable[["Simulator"], SimulatedProvider]
ServerFactory = Callable[["Simulator"], SimulatedServer]

# Filled by the provider modules of this package (see ``tidings.simulator.providers``).
HTTP_PROVIDERS: dict[str, ProviderFactory] = {}
SERVERS: dict[str, ServerFactory] = {}
KNOWN_ERRORS: dict[str, ErrorNames] = {}  # provider -> the error names it answers


class Simulator:
    def __init__(self, config: SimulatorConfig | None = None) -> None:
        from tidings.simulator import providers  # noqa: F401  (registers the providers)

        self.config = config or SimulatorConfig()
        self.states: dict[str, ProviderState] = {}
        self.http = {name: make(self) for name, make in HTTP_PROVIDERS.items()}
        self.servers = {name: make(self) for name, make in SERVERS.items()}
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._socket: socket.socket | None = None
        self._port: int | None = None

    def new_state(self, name: str) -> ProviderState:
        """The state of provider ``name``, with its configured behaviour."""
        import random

        state = ProviderState(
            name,
            self.config.behaviours.get(name, Behaviour()),
            rng=random.Random(f"{self.config.seed}:{name}"),
        )
        self.states[name] = state
        return state

    def state(self, name: str) -> ProviderState:
        return self.states[name]

    @property
    def url(self) -> str:
        return f"http://{self.config.host}:{self.http_port}"

    @property
    def http_port(self) -> int:
        assert self._port is not None, "simulator not started"
        return self._port

    def app(self) -> Starlette:
        routes: list[BaseRoute] = [
            Route("/_sim/counts", self._counts, methods=["GET"]),
            Route("/_sim/reset", self._reset, methods=["POST"]),
            Route("/_sim/{provider}/messages", self._messages, methods=["GET"]),
            Route("/_sim/{provider}/behaviour", self._behaviour, methods=["GET", "PATCH"]),
            Route("/_sim/{provider}/script", self._script, methods=["POST"]),
        ]
        for provider in self.http.values():
            routes.extend(provider.routes())
        return Starlette(routes=routes)

    async def start(self) -> None:
        self.config.credentials_dir.mkdir(parents=True, exist_ok=True)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.config.host, self.config.http_port))
        sock.listen(1024)
        sock.setblocking(False)
        self._socket = sock
        self._port = int(sock.getsockname()[1])
        hypercorn = HypercornConfig()
        hypercorn.bind = [f"fd://{sock.fileno()}"]
        hypercorn.accesslog = None
        hypercorn.errorlog = None
        hypercorn.keep_alive_timeout = 75
        self._stop.clear()
        self._task = asyncio.create_task(
            serve(self.app(), hypercorn, shutdown_trigger=self._stop.wait, mode="asgi")  # type: ignore[arg-type]
        )
        for server in self.servers.values():
            await server.start()
        await self._wait_until_serving()

    async def _wait_until_serving(self) -> None:
        for _ in range(200):
            try:
                _reader, writer = await asyncio.open_connection(self.config.host, self.http_port)
            except OSError:
                await asyncio.sleep(0.01)
                continue
            writer.close()
            return
        raise RuntimeError("the simulator did not start serving")

    async def stop(self) -> None:
        for server in self.servers.values():
            await server.stop()
        for provider in self.http.values():
            close = getattr(provider, "close", None)
            if close is not None:
                await close()  # background reporters (events, callbacks)
        self._stop.set()
        if self._task is not None:
            await self._task
            self._task = None
        if self._socket is not None:
            self._socket.detach()  # Hypercorn closed the listening descriptor it was given
            self._socket = None

    async def __aenter__(self) -> Simulator:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    # The control API.

    async def _counts(self, request: Request) -> Response:
        return JSONResponse({name: state.summary() for name, state in self.states.items()})

    async def _reset(self, request: Request) -> Response:
        for state in self.states.values():
            state.reset()
        return Response(status_code=204)

    def _provider_state(self, request: Request) -> ProviderState | None:
        return self.states.get(request.path_params["provider"])

    async def _messages(self, request: Request) -> Response:
        state = self._provider_state(request)
        if state is None:
            return _unknown(request)
        return JSONResponse([asdict(r) for r in state.received])

    async def _behaviour(self, request: Request) -> Response:
        state = self._provider_state(request)
        if state is None:
            return _unknown(request)
        if request.method == "PATCH":
            try:
                patch: dict[str, Any] = await request.json()
                behaviour = Behaviour.model_validate(state.behaviour.model_dump() | patch)
            except (ValueError, TypeError, ValidationError) as error:
                return JSONResponse({"error": str(error)}, status_code=422)
            refusal = _unknown_errors(state, "errors", list(behaviour.errors))
            if refusal is not None:
                return refusal
            state.behaviour = behaviour
        return JSONResponse(state.behaviour.model_dump(mode="json"))

    async def _script(self, request: Request) -> Response:
        state = self._provider_state(request)
        if state is None:
            return _unknown(request)
        try:
            body = await request.json()
            address, error, times = (
                str(body["address"]),
                str(body["error"]),
                int(body.get("times", 1)),
            )
        except (ValueError, KeyError, TypeError) as problem:
            return JSONResponse({"error": f"expected address, error, times: {problem}"}, 422)
        refusal = _unknown_errors(state, "error", [error])
        if refusal is not None:
            return refusal
        state.script(address, error, times)
        return Response(status_code=204)


def _unknown_errors(state: ProviderState, field: str, names: list[str]) -> Response | None:
    """422 naming the error names ``state``'s provider does not know, and the valid ones: a
    name taken from another provider (``500`` for Twilio's ``20500``) would otherwise be
    answered as something else than the user meant."""
    unknown = state.error_names.unknown(names) if state.error_names else []
    if not unknown:
        return None
    assert state.error_names is not None
    body = {
        "error": f"unknown error names for {state.name}: {', '.join(unknown)}",
        "field": field,
        "unknown": unknown,
    } | state.error_names.listing()
    return JSONResponse(body, status_code=422)


def _unknown(request: Request) -> Response:
    return JSONResponse(
        {"error": f"unknown provider {request.path_params['provider']!r}"}, status_code=404
    )
