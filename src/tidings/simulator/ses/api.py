"""The simulated Amazon SES v2 ``SendEmail`` endpoint, and its SNS notifications.

Same wire protocol as ``email.<region>.amazonaws.com``: ``POST /v2/email/outbound-emails``
with a JSON body, authenticated with AWS Signature Version 4 for the service ``ses``
(checked by ``ses_auth``, written apart from tidings' signer), validated as SES documents
(``ses_validation``), answered ``200 {"MessageId"}``. Errors are SES's rest-json shape: the
type in ``x-amzn-ErrorType`` (``Type:http://internal.amazon.com/coral/...``), the text in
the body's ``message``, with an ``x-amzn-RequestId``. After accepting, the outcome of the
email is published to the simulated SNS topic (``ses_notifications``, ``sns``).

SES has no idempotency key: a repeated ``tidings_delivery_id`` tag is a second email,
counted as a duplicate (with ``dedup`` on, answered with the first MessageId).
"""

from __future__ import annotations

import json
import secrets
import uuid
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from tidings.simulator.behaviour import OK, OUTAGE, RATE_LIMITED, ErrorNames, ProviderState
from tidings.simulator.server import HTTP_PROVIDERS, KNOWN_ERRORS
from tidings.simulator.ses.auth import Received, SigV4Check
from tidings.simulator.ses.notifications import SesNotifications
from tidings.simulator.ses.sns import SnsTopic
from tidings.simulator.ses.validation import problem, recipients, sender

if TYPE_CHECKING:
    from tidings.simulator.server import Simulator

SEND_PATH = "/v2/email/outbound-emails"
ACCOUNT = "ses-sim"  # the account name --write-config gives it
DELIVERY_TAG = "tidings_delivery_id"
MAX_REQUEST_BYTES = 60 * 1024 * 1024  # a 40 MB message, base64
_CORAL = "http://internal.amazon.com/coral/com.amazonaws.sesv2/"
BAD = "BadRequestException"

# Scripted/random error name -> (status, error type, message), as SES answers SendEmail.
ERRORS: dict[str, tuple[int, str, str]] = {
    "MessageRejected": (400, "MessageRejected", "Message rejected: illegal content."),
    "EmailNotVerified": (
        400,
        "MessageRejected",
        "Email address is not verified. The following identities failed the check in "
        "region US-EAST-1: tidings@example.com",
    ),
    "MailFromDomainNotVerifiedException": (
        400,
        "MailFromDomainNotVerifiedException",
        "The message can't be sent because the sending domain isn't verified.",
    ),
    "AccountSuspendedException": (
        400,
        "AccountSuspendedException",
        "The message can't be sent because the account's ability to send email has been "
        "permanently restricted.",
    ),
    "SendingPausedException": (
        400,
        "SendingPausedException",
        "The message can't be sent because the account's ability to send email is "
        "currently paused.",
    ),
    "NotFoundException": (404, "NotFoundException", "Configuration set does not exist."),
    "TooManyRequestsException": (429, "TooManyRequestsException", "Maximum sending rate exceeded."),
    "LimitExceededException": (400, "LimitExceededException", "Daily message quota exceeded."),
    "BadRequestException": (400, "BadRequestException", "Illegal address"),
    "500": (
        500,
        "InternalFailure",
        "The request processing has failed because of an unknown error, exception or failure.",
    ),
    "503": (503, "ServiceUnavailable", "Service is unable to handle request."),
}


class SesAccountPatch(BaseModel):
    """A PATCH of ``/_sim/ses/account``: the lists it names replace the account's."""

    model_config = ConfigDict(extra="forbid")

    verified_identities: list[Annotated[str, Field(min_length=1, max_length=320)]] | None = Field(
        default=None, max_length=10_000
    )
    configuration_sets: list[Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")]] | None = (
        Field(default=None, max_length=10_000)
    )


class SesSimulator:
    def __init__(self, sim: Simulator) -> None:
        self.state: ProviderState = sim.new_state("ses")
        self.state.error_names = ERROR_NAMES
        config = sim.config.ses
        self.auth = SigV4Check(
            access_key_id=config.access_key_id,
            secret_access_key=config.secret_access_key,
            region=config.region,
            service="ses",
            session_token=config.session_token,
        )
        self.topic = SnsTopic(sim, self.state, config, sns_endpoint(sim))
        self.region = config.region
        self.identities = {identity.lower() for identity in config.verified_identities}
        self.configuration_sets = set(config.configuration_sets)
        self.notifications = SesNotifications(self.state, self.topic)

    def routes(self) -> list[BaseRoute]:
        return [
            Route(SEND_PATH, self.send_email, methods=["POST"]),
            Route("/_sim/ses/account", self.account, methods=["GET", "PATCH"]),
            *self.topic.routes(),
        ]

    async def send_email(self, request: Request) -> Response:
        raw = await request.body()
        refusal = self.auth.refusal(received(request, raw))
        if refusal is not None:
            return error(refusal.status, refusal.error, refusal.message)
        if len(raw) > MAX_REQUEST_BYTES:
            return error(413, "RequestEntityTooLarge", "Request entity too large")
        try:
            body = json.loads(raw)
        except ValueError:
            return error(400, "SerializationException", "Malformed JSON body")
        found = problem(body)
        if found is not None:
            return error(400, *found)
        refused = self._account_refusal(body)
        if refused is not None:
            return error(*refused)
        return await self._deliver(body)

    def _account_refusal(self, body: dict[str, Any]) -> tuple[int, str, str] | None:
        """What SES refuses for this account: a configuration set that does not exist, or a
        From that is none of its verified identities (nor at one of its domains)."""
        name = body.get("ConfigurationSetName")
        if name is not None and name not in self.configuration_sets:
            return 404, "NotFoundException", f"Configuration set <{name}> does not exist."
        address = sender(body)
        domain = address.rpartition("@")[2].lower()
        parents = {".".join(domain.split(".")[i:]) for i in range(domain.count(".") + 1)}
        if address.lower() in self.identities or parents & self.identities:
            return None
        return (
            400,
            "MessageRejected",
            "Email address is not verified. The following identities failed the check in "
            f"region {self.region.upper()}: {address}",
        )

    async def account(self, request: Request) -> Response:
        """The control API's view of the account: ``verified_identities`` and
        ``configuration_sets``; a PATCH replaces the lists it names."""
        if request.method == "PATCH":
            try:
                patch = SesAccountPatch.model_validate_json(await request.body())
            except ValidationError as invalid:
                return JSONResponse({"error": str(invalid)}, status_code=422)
            if patch.verified_identities is not None:
                self.identities = {i.lower() for i in patch.verified_identities}
            if patch.configuration_sets is not None:
                self.configuration_sets = set(patch.configuration_sets)
        return JSONResponse(
            {
                "verified_identities": sorted(self.identities),
                "configuration_sets": sorted(self.configuration_sets),
            }
        )

    async def _deliver(self, body: dict[str, Any]) -> Response:
        address = recipients(body)[0]
        admission = await self.state.admit(address)
        if admission == OUTAGE:
            return error(*ERRORS["503"])
        if admission == RATE_LIMITED:
            return error(*ERRORS["TooManyRequestsException"])
        if admission != OK:
            return error(*error_for(admission))
        key = _tag(body, DELIVERY_TAG)
        message_id = self.state.first_answer(key) or new_message_id()
        self.state.record(address, key, body)
        if key is not None:
            self.state.answers.setdefault(key, message_id)
        self.notifications.accepted(address, message_id, body)
        return JSONResponse({"MessageId": message_id}, headers=_request_id())

    async def close(self) -> None:
        await self.topic.reporter.close()


def sns_endpoint(sim: Simulator) -> str | None:
    """Where the topic posts: as configured, else tidings' route for the ``ses-sim`` account
    when the simulator knows tidings' URL."""
    config = sim.config
    if config.ses.sns_endpoint is None and config.tidings_url:
        return f"{config.tidings_url.rstrip('/')}/v1/webhooks/ses/{ACCOUNT}"
    return config.ses.sns_endpoint


def received(request: Request, body: bytes) -> Received:
    """The request as SigV4 sees it: raw path and query, every header as sent."""
    raw_path = request.scope.get("raw_path") or request.url.path.encode()
    return Received(
        method=request.method,
        path=raw_path.decode("latin-1"),
        query=request.scope.get("query_string", b"").decode("latin-1"),
        headers=[(k.decode("latin-1"), v.decode("latin-1")) for k, v in request.headers.raw],
        body=body,
    )


def error(status: int, kind: str, message: str) -> Response:
    """SES's error answer: the type in x-amzn-ErrorType, the text in the body."""
    headers = _request_id() | {"x-amzn-ErrorType": f"{kind}:{_CORAL}"}
    return JSONResponse({"message": message}, status_code=status, headers=headers)


def error_for(name: str) -> tuple[int, str, str]:
    """The answer for an error name: a documented one, any status code, or a BadRequest."""
    if name in ERRORS:
        return ERRORS[name]
    if name.isdigit() and 400 <= int(name) <= 599:
        return int(name), "InternalFailure" if int(name) >= 500 else BAD, f"simulated {name}"
    return 400, BAD, name


def new_message_id() -> str:
    """An id shaped as SES's: ``0100`` + hex time, a UUID, ``-000000``."""
    return f"0100{secrets.token_hex(6)}-{uuid.uuid4()}-000000"


def _tag(body: dict[str, Any], name: str) -> str | None:
    for tag in body.get("EmailTags") or []:
        if tag.get("Name") == name:
            return str(tag.get("Value"))
    return None


def _request_id() -> dict[str, str]:
    return {"x-amzn-RequestId": str(uuid.uuid4())}


# The error names this provider answers as documented (the control API refuses others).
ERROR_NAMES = ErrorNames(frozenset(ERRORS), r"[45]\d\d", "any HTTP status from 400 to 599")
KNOWN_ERRORS["ses"] = ERROR_NAMES
HTTP_PROVIDERS["ses"] = SesSimulator
