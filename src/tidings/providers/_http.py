"""The provider accounts' HTTP: httpx's client on aiohttp's pool, and what no answer means.

The adapters speak httpx (requests, responses, errors); the connections underneath are
aiohttp's. httpcore's pool walks every connection it holds on each request and each
release, so its CPU per request grows with the pool: at 200 connections (an account
sending 200 at a time to hide a provider's latency) it spent about 8 ms of CPU per request,
a ceiling near 120 sends a second per process; aiohttp's pool keeps free connections in a
queue, and the same requests cost under 1 ms (docs/benchmarks.md, the provider HTTP notes).

aiohttp's errors become the httpx errors of the same phase, because ``no_answer`` (below)
decides from the phase whether a request may have reached the provider: a connection that
was never made (or never handed out) is ``ConnectError``/``ConnectTimeout``, and everything
after that is ambiguous (``ReadTimeout``, ``ReadError``, ``RemoteProtocolError``). aiohttp
does not say whether a reset came while writing or reading, so a reset counts as ambiguous:
an at-most-once account fails it rather than risk a second send.

HTTP/2 clients (APNs, FCM) keep httpx's own transport: they multiplex over one connection.

What an adapter says when no answer came (``no_answer``): httpx tells the phases apart.
Connecting (``ConnectError``, ``ConnectTimeout``) or waiting for a pooled connection
(``PoolTimeout``) fails before a byte of the request left, and a write that failed
(``WriteError``) left it unfinished: the provider cannot have acted on it. After that
(``WriteTimeout``, ``ReadTimeout``, a connection reset or closed before the answer), the
provider may have received and acted on it: the outcome is ambiguous, and an account's
``on_ambiguous`` decides what follows.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any

import aiohttp
import httpx
from yarl import URL

from tidings.providers.base import TransientError


class AiohttpTransport(httpx.AsyncBaseTransport):
    """At most ``max_connections`` connections, kept alive ``keepalive_expiry`` seconds."""

    def __init__(
        self,
        max_connections: int,
        *,
        keepalive_expiry: float = 5.0,
        trust_env: bool = True,
        verify: ssl.SSLContext | bool = True,
    ) -> None:
        self.max_connections = max_connections
        self.keepalive_expiry = keepalive_expiry
        self.trust_env = trust_env
        self.verify = verify
        self._session: aiohttp.ClientSession | None = None

    def _opened(self) -> aiohttp.ClientSession:
        # Made on first use: aiohttp binds a session to the running event loop.
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(
                limit=self.max_connections,
                limit_per_host=0,
                keepalive_timeout=self.keepalive_expiry,
                ssl=self.verify,
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                trust_env=self.trust_env,
                # httpx decodes bodies, keeps cookies and sets these headers itself.
                auto_decompress=False,
                cookie_jar=aiohttp.DummyCookieJar(),
                skip_auto_headers=("User-Agent", "Accept", "Accept-Encoding", "Content-Type"),
            )
        return self._session

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        timeout = request.extensions.get("timeout", {})
        sni = request.extensions.get("sni_hostname")
        body = await request.aread()
        with _as_httpx_errors():
            response = await self._opened().request(
                request.method,
                URL(str(request.url), encoded=True),
                headers=request.headers.multi_items(),
                data=body or None,
                allow_redirects=False,
                compress=None,
                server_hostname=sni.decode() if isinstance(sni, bytes) else sni,
                timeout=aiohttp.ClientTimeout(
                    total=None,
                    connect=timeout.get("pool"),
                    sock_connect=timeout.get("connect"),
                    sock_read=timeout.get("read"),
                ),
            )
        reason = (response.reason or "").encode("latin-1", "replace")
        return httpx.Response(
            response.status,
            headers=[(k.decode("latin-1"), v.decode("latin-1")) for k, v in response.raw_headers],
            stream=_Body(response),
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": reason},
        )

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


class _Body(httpx.AsyncByteStream):
    """An aiohttp response's body; closing it gives its connection back (or closes the
    connection, when the body was not read to its end)."""

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _as_httpx_errors():
            async for chunk in self._response.content.iter_any():
                yield chunk

    async def aclose(self) -> None:
        self._response.release()


# Most specific first: the first match decides.
_ERRORS: tuple[tuple[type[BaseException], type[httpx.TransportError]], ...] = (
    (aiohttp.ConnectionTimeoutError, httpx.ConnectTimeout),  # pool wait or connect
    (aiohttp.SocketTimeoutError, httpx.ReadTimeout),
    (aiohttp.ServerTimeoutError, httpx.ReadTimeout),
    (aiohttp.ClientConnectorError, httpx.ConnectError),  # DNS, refused, TLS handshake
    (aiohttp.ServerDisconnectedError, httpx.RemoteProtocolError),
    (aiohttp.ClientPayloadError, httpx.ReadError),
    (aiohttp.ClientResponseError, httpx.RemoteProtocolError),
    (aiohttp.InvalidURL, httpx.UnsupportedProtocol),
    (aiohttp.ClientError, httpx.ReadError),  # a reset or anything else: perhaps sent
)


@contextmanager
def _as_httpx_errors() -> Iterator[None]:
    try:
        yield
    except aiohttp.ClientError as error:
        for aiohttp_error, httpx_error in _ERRORS:
            if isinstance(error, aiohttp_error):
                raise httpx_error(f"{type(error).__name__}: {error}") from error
        raise  # unreachable: ClientError is the last row


def pooled_client(max_connections: int, **client: Any) -> httpx.AsyncClient:
    """An httpx client for one provider account, on ``AiohttpTransport``. ``client`` takes
    httpx.AsyncClient's arguments (base_url, timeout, headers...); ``trust_env=False``
    also keeps proxies from the environment out of the transport."""
    transport = AiohttpTransport(max_connections, trust_env=client.get("trust_env", True))
    return httpx.AsyncClient(transport=transport, **client)


# A write that failed outright left the request unfinished: the server cannot act on it.
_BEFORE_SENDING = (
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx.PoolTimeout,
    httpx.WriteError,
)


def no_answer(provider: str, error: httpx.TransportError) -> TransientError:
    """The transient error for a request that got no answer, ambiguous unless it never left."""
    if isinstance(error, _BEFORE_SENDING):
        return TransientError(f"{provider} unreachable: {type(error).__name__}")
    return TransientError(
        f"{provider} did not answer: {type(error).__name__} (perhaps sent)",
        reason="no_answer",
        ambiguous=True,
    )
