"""The two requests an SNS message makes tidings send: fetching its signing certificate
(cached) and confirming a subscription.

Both go only to URLs ``sns_signature.trusted_url`` accepted, follow no redirect and read at
most ``MAX_BYTES``. SNS names a new certificate by a new URL, so a certificate is cached by
its URL (``size`` of them, each for ``ttl`` seconds); concurrent requests for one URL share
one fetch, and a failed fetch is not cached.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable

import httpx
from cryptography import x509

MAX_BYTES = 64 * 1024  # an SNS certificate is about 2 KB
TIMEOUT_SECONDS = 10.0


class FetchFailed(Exception):
    """The certificate could not be fetched or read, or the confirmation was refused."""


class CertificateCache:
    def __init__(
        self,
        *,
        size: int = 32,
        ttl: float = 24 * 3600.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._size = size
        self._ttl = ttl
        self._clock = clock
        self._certificates: OrderedDict[str, tuple[float, x509.Certificate]] = OrderedDict()
        self._pending: dict[str, asyncio.Future[x509.Certificate]] = {}

    async def get(self, url: str) -> x509.Certificate:
        """The certificate at ``url``; raises ``FetchFailed``."""
        cached = self._certificates.get(url)
        if cached is not None and cached[0] > self._clock():
            self._certificates.move_to_end(url)
            return cached[1]
        pending = self._pending.get(url)
        if pending is None:
            pending = asyncio.ensure_future(_certificate(url))
            self._pending[url] = pending
            pending.add_done_callback(lambda _: self._pending.pop(url, None))
        # Shielded: one caller cancelled does not cancel the fetch the others wait for.
        certificate = await asyncio.shield(pending)
        self._certificates[url] = (self._clock() + self._ttl, certificate)
        self._certificates.move_to_end(url)
        while len(self._certificates) > self._size:
            self._certificates.popitem(last=False)
        return certificate

    def clear(self) -> None:
        self._certificates.clear()


async def confirm_subscription(url: str) -> None:
    """GET the SubscribeURL of a SubscriptionConfirmation; raises ``FetchFailed``."""
    await _get(url)


async def _certificate(url: str) -> x509.Certificate:
    body = await _get(url)
    try:
        return x509.load_pem_x509_certificate(body)
    except ValueError as error:
        raise FetchFailed(f"not a PEM certificate at {url}: {error}") from error


async def _get(url: str) -> bytes:
    shown = url.split("?", 1)[0]  # the errors are logged: a SubscribeURL's query has its token
    try:
        async with (
            httpx.AsyncClient(timeout=TIMEOUT_SECONDS, follow_redirects=False) as client,
            client.stream("GET", url) as response,
        ):
            if response.status_code != 200:
                raise FetchFailed(f"GET {shown}: HTTP {response.status_code}")
            body = b""
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > MAX_BYTES:
                    raise FetchFailed(f"GET {shown}: more than {MAX_BYTES} bytes")
            return body
    except httpx.HTTPError as error:
        raise FetchFailed(f"GET {shown}: {type(error).__name__}") from error
