"""Outbound webhooks: POST the delivery's JSON to the address, signed per Standard Webhooks.

Each endpoint (URL) is signed with its own secret, derived from the account's
(``endpoint_secret``), so a receiver cannot forge deliveries to another receiver and nothing
per endpoint is stored.

The target host is resolved once per send and checked (``ssrf``); the request then goes to
a checked address (Host header and TLS SNI keep the original name), so a second DNS answer
cannot point it elsewhere. Redirects are not followed for the same reason. Plain http only
where the account sets ``allow_insecure``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from typing import Any, Literal

import httpx
from pydantic import Field, SecretStr, field_validator

from tidings.providers._http import pooled_client
from tidings.providers._retry_after import parse_retry_after
from tidings.providers.accounts import AccountSettings
from tidings.providers.base import (
    Message,
    PermanentError,
    ProviderError,
    SendResult,
    TransientError,
)
from tidings.providers.ssrf import IPAddress, UnsafeTarget, safe_addresses, url_problem
from tidings.providers.webhook import signing as standard_webhooks
from tidings.states import Effect

THROTTLED = {408, 429, 502, 503, 504}  # 408: the receiver timed out reading; try again
# A receiver being deployed may answer these for a while (route or secret not there yet).
RETRIED_CLIENT_ERRORS = {400, 401, 403, 404}
DEFAULT_PORTS = {"http": 80, "https": 443}
MAX_RESPONSE_BYTES = 64 * 1024  # read at most this much of an answer (we only need the status)
USER_AGENT = "tidings-webhooks/1"


class WebhookAccount(AccountSettings):
    kind: Literal["webhook"] = "webhook"
    secret: SecretStr  # whsec_<base64>; each endpoint gets a secret derived from it
    allow_private: bool = False  # reach loopback/private targets (development, tests)
    allow_insecure: bool = False  # plain http:// targets (development, tests)
    timeout: float = Field(default=15.0, gt=0, le=300)

    @field_validator("secret")
    @classmethod
    def _decodable(cls, secret: SecretStr) -> SecretStr:
        standard_webhooks.decode_secret(secret.get_secret_value())
        return secret


class WebhookProvider:
    def __init__(self, name: str, account: WebhookAccount) -> None:
        self.name = name
        self.account = account
        self._client = pooled_client(
            account.max_in_flight,
            timeout=account.timeout,
            follow_redirects=False,
            trust_env=False,  # a proxy from the environment would bypass the address check
            headers={"user-agent": USER_AGENT},
        )

    async def send(self, message: Message) -> SendResult:
        url = _target(message.address)
        if url.scheme == "http" and not self.account.allow_insecure:
            # Not suppressed: the URL is fine, this account's setting refuses it.
            raise PermanentError(
                "plain http:// webhook targets need allow_insecure = true on the account",
                reason="insecure_target",
            )
        addresses = await self._addresses(url)
        body = encode_body(message)
        secret = endpoint_secret(self.account.secret.get_secret_value(), message.address)
        headers = standard_webhooks.headers(secret, message.idempotency_key, body)
        headers["content-type"] = "application/json"
        status, response_headers = await self._post(url, addresses, body, headers)
        if 200 <= status < 300:
            return SendResult(provider=self.name, provider_msg_id=message.idempotency_key)
        raise classify(status, response_headers)

    async def _addresses(self, url: httpx.URL) -> list[IPAddress]:
        port = url.port or (443 if url.scheme == "https" else 80)
        try:
            return await safe_addresses(_ascii_host(url), port, self.account.allow_private)
        except UnsafeTarget as error:
            raise PermanentError(str(error), reason="private_target") from error
        except (OSError, UnicodeError) as error:  # socket.gaierror: DNS may recover
            raise TransientError(f"cannot resolve {url.host}: {error}") from error

    async def _post(
        self, url: httpx.URL, addresses: list[IPAddress], body: bytes, headers: dict[str, str]
    ) -> tuple[int, httpx.Headers]:
        """POST to the first address that accepts a connection (nothing was sent to the
        ones that refused, so trying the next cannot deliver twice)."""
        last: Exception | None = None
        for address in addresses:
            try:
                return await self._post_to(url, address, body, headers)
            except httpx.ConnectError as error:
                last = error
            except (httpx.InvalidURL, httpx.UnsupportedProtocol, ValueError) as error:
                # The HTTP client cannot make this request (aiohttp raises ValueError for
                # some URLs): it never will, so it is not retried.
                raise PermanentError(
                    f"webhook URL refused by the HTTP client: {error}", reason="invalid_target"
                ) from error
            except httpx.TimeoutException as error:
                raise TransientError(f"webhook timeout: {type(error).__name__}") from error
            except httpx.TransportError as error:
                raise TransientError(f"webhook failed: {type(error).__name__}") from error
        raise TransientError(f"webhook connection failed: {last!r}") from last

    async def _post_to(
        self, url: httpx.URL, address: IPAddress, body: bytes, headers: dict[str, str]
    ) -> tuple[int, httpx.Headers]:
        pinned = url.copy_with(host=str(address))
        extensions: dict[str, Any] = {}
        if url.scheme == "https":
            extensions["sni_hostname"] = _ascii_host(url)
        request_headers = {**headers, "host": url.netloc.decode("ascii")}
        async with self._client.stream(
            "POST", pinned, content=body, headers=request_headers, extensions=extensions
        ) as response:
            read = 0
            async for chunk in response.aiter_raw():
                read += len(chunk)
                if read >= MAX_RESPONSE_BYTES:
                    break
            return response.status_code, response.headers

    async def close(self) -> None:
        await self._client.aclose()


def encode_body(message: Message) -> bytes:
    """The JSON body: the rendered ``content.data``, else the notification's own data."""
    data = message.content.data or message.data
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False, default=str).encode()


def classify(status: int, headers: httpx.Headers) -> ProviderError:
    described = f"webhook answered {status}"
    if status == 410:
        # The receiver says the endpoint is gone for good: never use this URL again.
        return PermanentError(described, effect=Effect.SUPPRESS_ADDRESS, reason="endpoint_gone")
    if status in THROTTLED or status in RETRIED_CLIENT_ERRORS or status >= 500:
        return TransientError(
            described,
            retry_after=parse_retry_after(headers.get("retry-after")),
            reason="rate_limited" if status == 429 else f"http_{status}",
        )
    if 300 <= status < 400:
        return PermanentError(f"{described} (redirects are not followed)", reason="redirect")
    return PermanentError(described, reason=f"http_{status}")


def canonical_url(address: str) -> str:
    """The form an endpoint's secret is derived from: scheme and host lower-cased (the host
    IDNA-encoded, IPv6 in brackets), the default port dropped, path and query as sent on the
    request line (no fragment; an empty path is ``/``, a bare ``?`` is dropped)."""
    url = _target(address)
    host = _ascii_host(url).lower()
    if ":" in host:
        host = f"[{host}]"
    if url.port is not None and url.port != DEFAULT_PORTS[url.scheme]:
        host = f"{host}:{url.port}"
    target = url.raw_path.decode("ascii")  # httpx percent-encodes anything else
    if not url.query:
        target = target.removesuffix("?")  # a receiver cannot tell "/x?" from "/x"
    return f"{url.scheme}://{host}{target}"


def endpoint_secret(account_secret: str, address: str) -> str:
    """``whsec_`` + base64(HMAC-SHA256(account key, canonical URL)): the endpoint's own
    secret, which ``tidings webhook-secret`` shows to its receiver."""
    key = standard_webhooks.decode_secret(account_secret)
    digest = hmac.new(key, canonical_url(address).encode("ascii"), hashlib.sha256).digest()
    return standard_webhooks.SECRET_PREFIX + base64.b64encode(digest).decode("ascii")


def _ascii_host(url: httpx.URL) -> str:
    """The host as resolved and sent in SNI: IDNA-encoded, IPv6 without brackets."""
    return url.raw_host.decode("ascii")


def _target(address: str) -> httpx.URL:
    problem = url_problem(address)
    if problem is not None:
        # A URL stored before the API refused it: no retry makes it sendable.
        raise PermanentError(f"webhook URL {problem}", reason="invalid_target")
    try:
        url = httpx.URL(address)
    except httpx.InvalidURL as error:
        raise PermanentError(f"invalid webhook URL: {error}", reason="invalid_target") from error
    if url.scheme not in ("http", "https") or not url.host:
        raise PermanentError("webhook URL must be http(s)://host/...", reason="invalid_target")
    if url.port is not None and not 0 < url.port < 65536:
        raise PermanentError("webhook URL has a port outside 1-65535", reason="invalid_target")
    return url


__all__ = [
    "WebhookAccount",
    "WebhookProvider",
    "canonical_url",
    "classify",
    "encode_body",
    "endpoint_secret",
]
