"""Vonage SMS through the Messages API: ``POST {base_url}/v1/messages``.

JSON ``{"message_type": "text", "channel": "sms", "to", "from", "text", "client_ref"}``,
authenticated with HTTP Basic (API key and secret) or an application JWT
(``tidings.providers.vonage_auth``). Success is 202 ``{"message_uuid"}``, our provider
message id; ``client_ref`` (at most 100 characters) is the delivery id, which every status
webhook echoes. Errors are RFC 7807 problem JSON (``type``, ``title``, ``detail``,
``instance``, and for 422 ``invalid_parameters``) and are classified by HTTP status.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import httpx
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey
from pydantic import Field, SecretStr, model_validator

from tidings.providers.accounts import AccountSettings, exactly_one
from tidings.providers.base import (
    Message,
    PermanentError,
    PoisonError,
    ProviderError,
    SendResult,
    TransientError,
)
from tidings.providers.http_errors import no_answer
from tidings.providers.http_transport import pooled_client
from tidings.providers.retry_after import parse_retry_after
from tidings.providers.vonage_auth import ApplicationJwt, load_rsa_key
from tidings.states import Effect

MAX_TEXT_CHARS = 1000  # the Messages API's limit on an SMS text
MAX_CLIENT_REF = 100
# Credentials, balance and permissions are our configuration, not the message: retry late
# (docs/providers.md, configuration errors) so nothing is lost while an operator fixes them.
CONFIG_RETRY_SECONDS = 300.0
# Vonage's 429 carries no documented Retry-After: back off a second unless it sends one.
DEFAULT_THROTTLE_SECONDS = 1.0
CONFIG_STATUSES = {401: "auth_failed", 402: "low_balance", 403: "forbidden"}


class VonageAccount(AccountSettings):
    kind: Literal["vonage"] = "vonage"
    # A number in E.164 (the + is dropped on the wire) or an alphanumeric sender ID.
    sender: str = Field(pattern=r"^(\+?[1-9][0-9]{6,14}|[A-Za-z0-9][A-Za-z0-9 ]{0,10})$")
    # HTTP Basic credentials, or an application and its private key (a JWT per request).
    api_key: str | None = None
    api_secret: SecretStr | None = None
    application_id: str | None = Field(default=None, min_length=1, max_length=64)
    private_key: SecretStr | None = None
    private_key_file: Path | None = None
    # Vonage signs status webhooks with it (HS256); unset, tidings refuses them.
    signature_secret: SecretStr | None = None
    base_url: str = "https://api.nexmo.com"
    # At most once: the Messages API has no idempotency key (see AccountSettings).
    on_ambiguous: Literal["retry", "fail"] = "fail"

    @model_validator(mode="after")
    def _one_way_to_authenticate(self) -> VonageAccount:
        basic = (self.api_key, self.api_secret)
        if (basic[0] is None) != (basic[1] is None):
            raise ValueError("give api_key and api_secret together")
        if self.application_id is None and (self.private_key or self.private_key_file):
            raise ValueError("a private key needs its application_id")
        if self.application_id is not None:
            exactly_one(self, "private_key", "private_key_file")
            if self.api_key is not None:
                raise ValueError("give api_key/api_secret or an application, not both")
            self.application_key()  # refuse an unreadable key at start-up
        elif self.api_key is None:
            raise ValueError("give api_key and api_secret, or application_id and a private key")
        return self

    def application_key(self) -> RSAPrivateKey:
        try:
            if self.private_key is not None:
                return load_rsa_key(self.private_key.get_secret_value())
            assert self.private_key_file is not None
            return load_rsa_key(self.private_key_file.read_text())
        except (OSError, ValueError, TypeError) as error:
            raise ValueError(f"unreadable Vonage application private key: {error}") from None

    def request_auth(self) -> httpx.Auth:
        if self.api_key is not None and self.api_secret is not None:
            return httpx.BasicAuth(self.api_key, self.api_secret.get_secret_value())
        assert self.application_id is not None
        return ApplicationJwt(self.application_id, self.application_key())


class VonageProvider:
    def __init__(self, name: str, account: VonageAccount) -> None:
        self.name = name
        self.account = account
        self._url = f"{account.base_url.rstrip('/')}/v1/messages"
        self._client = pooled_client(
            account.max_in_flight, auth=account.request_auth(), timeout=account.timeout
        )

    async def send(self, message: Message) -> SendResult:
        body = self.body(message)
        try:
            response = await self._client.post(self._url, json=body)
        except httpx.TransportError as error:
            raise no_answer("vonage", error) from error
        if response.status_code in (200, 202):
            return SendResult(provider=self.name, provider_msg_id=_message_uuid(response))
        raise classify(response)

    def body(self, message: Message) -> dict[str, str]:
        """The request's JSON; PoisonError when the text cannot be sent."""
        text = message.content.text
        if not text:
            raise PoisonError("empty SMS text")
        if len(text) > MAX_TEXT_CHARS:
            raise PoisonError(f"SMS text of {len(text)} characters exceeds {MAX_TEXT_CHARS}")
        return {
            "message_type": "text",
            "channel": "sms",
            "to": message.address.removeprefix("+"),
            "from": self.account.sender.removeprefix("+"),
            "text": text,
            "client_ref": message.idempotency_key[:MAX_CLIENT_REF],
        }

    async def close(self) -> None:
        await self._client.aclose()


def classify(response: httpx.Response) -> ProviderError:
    """The error for a non-2xx answer, by HTTP status (the problem's words only describe)."""
    status = response.status_code
    problem = _problem(response)
    described = f"vonage {status} {problem.get('title', '')}: {problem.get('detail', '')}"[:500]
    wait = parse_retry_after(response.headers.get("retry-after"))
    if status in CONFIG_STATUSES:
        return TransientError(
            described, retry_after=CONFIG_RETRY_SECONDS, reason=CONFIG_STATUSES[status]
        )
    if status == 429:
        return TransientError(
            described, retry_after=wait or DEFAULT_THROTTLE_SECONDS, reason="rate_limited"
        )
    if status >= 500:
        return TransientError(described, retry_after=wait, reason=f"http_{status}")
    if status == 422 and "to" in _invalid_names(problem):
        return PermanentError(described, effect=Effect.SUPPRESS_ADDRESS, reason="invalid_number")
    return PermanentError(described, reason=f"http_{status}")


def _problem(response: httpx.Response) -> dict[str, Any]:
    """The RFC 7807 body, or {} when the answer has none."""
    try:
        body = response.json()
    except ValueError:
        return {"detail": response.text[:200]}
    return body if isinstance(body, dict) else {}


def _invalid_names(problem: dict[str, Any]) -> set[str]:
    """The parameters a 422 names as invalid (``invalid_parameters[].name``)."""
    listed = problem.get("invalid_parameters")
    if not isinstance(listed, list):
        return set()
    return {str(item.get("name")) for item in listed if isinstance(item, dict)}


def _message_uuid(response: httpx.Response) -> str | None:
    """The message UUID; None if the body is unreadable (the message was accepted anyway)."""
    try:
        value = response.json().get("message_uuid")
    except (ValueError, AttributeError):
        return None
    return str(value)[:255] if value else None
