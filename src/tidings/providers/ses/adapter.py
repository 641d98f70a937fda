"""The Amazon SES v2 ``SendEmail`` adapter (httpx, AWS Signature Version 4).

``POST {base_url}/v2/email/outbound-emails`` (default ``https://email.{region}.amazonaws.com``)
with a JSON body (``tidings.providers.ses_content``), signed for the service ``ses`` in the
account's region. 200 answers ``{"MessageId"}``, our provider message id; SES's bounce,
complaint and delivery notifications (through SNS, ``api/routes/ses_webhooks.py``) name it.
SES has no idempotency key: a repeated send is a second email.

Errors are classified by their type, read as botocore reads a rest-json error: the
``x-amzn-ErrorType`` header up to its first colon, else the body's ``__type`` (or ``code``)
after its last ``#``; the text is the body's ``message``. The SES v2 API reference lists
SendEmail's errors; see docs/providers.md for the table.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Literal
from urllib.parse import urlsplit

import httpx
from pydantic import Field, SecretStr, field_validator

from tidings.providers._http import no_answer, pooled_client
from tidings.providers._retry_after import parse_retry_after
from tidings.providers.accounts import AccountSettings
from tidings.providers.aws_sigv4 import Credentials, Scope, sign
from tidings.providers.base import (
    Message,
    PermanentError,
    PoisonError,
    ProviderError,
    SendResult,
    TransientError,
)
from tidings.providers.mime import wire_address
from tidings.providers.ses_content import send_email_body

SEND_PATH = "/v2/email/outbound-emails"
SERVICE = "ses"  # the signing name of SES v2
# Our own configuration (an identity, the account, the keys): an operator fixes it.
CONFIGURATION_RETRY_AFTER = 300.0
# The sending identity or account is not in a state to send (SES v2 API reference).
CONFIGURATION_ERRORS = frozenset(
    {
        "MailFromDomainNotVerifiedException",
        "AccountSuspendedException",
        "SendingPausedException",
        "NotFoundException",  # the configuration set (or identity) named does not exist
    }
)
# AWS's authentication answers (common errors): a key, a token, the clock, or IAM.
CREDENTIAL_ERRORS = frozenset(
    {
        "UnrecognizedClientException",
        "InvalidClientTokenId",
        "SignatureDoesNotMatch",
        "SignatureDoesNotMatchException",
        "InvalidSignatureException",
        "IncompleteSignature",
        "IncompleteSignatureException",
        "MissingAuthenticationToken",
        "MissingAuthenticationTokenException",
        "ExpiredToken",
        "ExpiredTokenException",
        "RequestExpired",
        "AccessDenied",
        "AccessDeniedException",
    }
)
THROTTLING_ERRORS = frozenset(
    {"TooManyRequestsException", "LimitExceededException", "Throttling", "ThrottlingException"}
)
_REGION = r"^[a-z]{2}(-[a-z]+)+-\d{1,2}$"
_TOPIC_ARN = r"^arn:aws[a-z-]*:sns:[a-z]{2}(-[a-z]+)+-\d{1,2}:\d{12}:[A-Za-z0-9_-]{1,256}$"


class SesAccount(AccountSettings):
    kind: Literal["ses"] = "ses"
    access_key_id: str = Field(pattern=r"^[A-Z0-9]{16,128}$")
    secret_access_key: SecretStr
    session_token: SecretStr | None = None  # temporary credentials (STS)
    region: str = Field(pattern=_REGION)
    base_url: str | None = None  # default https://email.{region}.amazonaws.com
    from_email: str  # a verified identity (address or domain) of the account
    from_name: str | None = None
    configuration_set: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_-]{1,64}$")
    # The SNS topics SES publishes this account's notifications to. Only these are accepted:
    # anyone can subscribe our endpoint to a topic of their own, which SNS signs too.
    sns_topic_arns: list[str] = Field(default_factory=list)
    # Origins (``scheme://host[:port]``) trusted for SigningCertURL and SubscribeURL besides
    # https://sns.<region>.amazonaws.com: only a simulator's or a test's.
    sns_trusted_origins: list[str] = Field(default_factory=list)

    @field_validator("from_email")
    @classmethod
    def _sender_is_ascii(cls, value: str) -> str:
        if not wire_address(value).isascii():
            raise ValueError("SES does not support SMTPUTF8: the local part must be ASCII")
        return value

    @field_validator("sns_topic_arns")
    @classmethod
    def _topic_arns(cls, values: list[str]) -> list[str]:
        bad = [arn for arn in values if re.fullmatch(_TOPIC_ARN, arn) is None]
        if bad:
            raise ValueError(f"not SNS topic ARNs: {bad}")
        return values

    @field_validator("sns_trusted_origins")
    @classmethod
    def _origins(cls, values: list[str]) -> list[str]:
        return [_origin(value) for value in values]

    @property
    def endpoint(self) -> str:
        return (self.base_url or f"https://email.{self.region}.amazonaws.com").rstrip("/")


def _origin(value: str) -> str:
    """``scheme://host[:port]`` in lower case; anything more is refused."""
    parts = urlsplit(value.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.path not in ("", "/"):
        raise ValueError(f"{value!r} is not an origin (scheme://host[:port])")
    if parts.query or parts.fragment or "@" in parts.netloc:
        raise ValueError(f"{value!r} is not an origin (scheme://host[:port])")
    return f"{parts.scheme}://{parts.netloc.lower()}"


class SesProvider:
    def __init__(
        self, name: str, account: SesAccount, *, clock: Callable[[], float] = time.time
    ) -> None:
        self.name = name
        self.account = account
        self._clock = clock
        self._credentials = Credentials(
            account.access_key_id,
            account.secret_access_key.get_secret_value(),
            account.session_token.get_secret_value() if account.session_token else None,
        )
        self._scope = Scope(account.region, SERVICE)
        self._client = pooled_client(
            account.max_in_flight, base_url=account.endpoint, timeout=account.timeout
        )

    async def send(self, message: Message) -> SendResult:
        account = self.account
        body = send_email_body(
            message,
            from_email=account.from_email,
            from_name=account.from_name,
            configuration_set=account.configuration_set,
        )
        request = self._signed(json.dumps(body, separators=(",", ":")).encode())
        try:
            response = await self._client.send(request)
        except httpx.TransportError as error:  # connect, read, timeouts
            raise no_answer("SES", error) from error
        if response.is_success:
            return SendResult(self.name, _message_id(response))
        raise classify(response, self._clock())

    async def close(self) -> None:
        await self._client.aclose()

    def _signed(self, body: bytes) -> httpx.Request:
        """The request with its SigV4 headers, computed from exactly what is sent."""
        content_type = "application/json"
        request = self._client.build_request(
            "POST", SEND_PATH, content=body, headers={"Content-Type": content_type}
        )
        signed = [("Host", request.headers["Host"]), ("Content-Type", content_type)]
        now = datetime.fromtimestamp(self._clock(), UTC)
        path = request.url.raw_path.decode("ascii")
        request.headers.update(
            sign("POST", path, signed, body, self._credentials, self._scope, now)
        )
        return request


def classify(response: httpx.Response, now: float) -> ProviderError:
    """The error for a refused SendEmail (docs/providers.md, Amazon SES)."""
    status = response.status_code
    kind, text = error_type(response)
    detail = f"SES {status} {kind}: {text}" if kind else f"SES {status}: {text}"
    if kind in CREDENTIAL_ERRORS or status in (401, 403):
        return _configuration(detail, "credentials")
    if kind in CONFIGURATION_ERRORS:
        return _configuration(detail, kind)
    if kind == "MessageRejected":
        if "not verified" in text.lower():  # the sender identity, or a sandbox recipient
            return _configuration(detail, "identity_not_verified")
        return PermanentError(detail, reason="MessageRejected")
    retry_after = parse_retry_after(response.headers.get("Retry-After"), now)
    if kind in THROTTLING_ERRORS or status == 429:
        return TransientError(detail, retry_after=retry_after, reason="rate_limited")
    if status >= 500 or status == 408:
        return TransientError(detail, retry_after=retry_after, reason=f"http_{status}")
    if status == 413:
        return PoisonError(detail, reason="payload_too_large")
    return PermanentError(detail, reason="bad_request" if status == 400 else f"http_{status}")


def _configuration(detail: str, reason: str) -> TransientError:
    return TransientError(detail, retry_after=CONFIGURATION_RETRY_AFTER, reason=reason)


def error_type(response: httpx.Response) -> tuple[str | None, str]:
    """``(error type, message)`` of an AWS rest-json error answer."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        body = {}
    header = response.headers.get("x-amzn-ErrorType")
    kind = header.split(":", 1)[0].strip() if header else None
    if not kind:
        code = body.get("__type") or body.get("code") or body.get("Code")
        kind = str(code).rsplit("#", 1)[-1] if code else None
    message = body.get("message") or body.get("Message") or response.text[:200]
    return kind or None, str(message)


def _message_id(response: httpx.Response) -> str | None:
    try:
        found = response.json().get("MessageId")
    except (ValueError, AttributeError):
        return None
    return str(found) if found else None
