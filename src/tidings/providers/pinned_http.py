"""POST to a URL that someone else chose (a push subscription's endpoint), safely.

The host is resolved once and every address checked (``ssrf``) unless private targets are
allowed; the request then goes to a checked address, with the original name in the Host
header and TLS SNI, so a second DNS answer cannot send it elsewhere. Redirects are never
followed and at most ``MAX_RESPONSE_BYTES`` of an answer are read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

from tidings.providers._http import no_answer
from tidings.providers.base import PermanentError, TransientError
from tidings.providers.ssrf import IPAddress, UnsafeTarget, safe_addresses, url_problem

MAX_RESPONSE_BYTES = 64 * 1024


@dataclass(frozen=True)
class Answer:
    status: int
    headers: httpx.Headers
    body: bytes


def target(address: str, allow_insecure: bool) -> httpx.URL:
    """``address`` as a URL we may call; PermanentError when it never can be."""
    problem = url_problem(address)
    if problem is not None:
        raise PermanentError(f"the URL {problem}", reason="invalid_target")
    try:
        url = httpx.URL(address)
    except httpx.InvalidURL as error:
        raise PermanentError(f"invalid URL: {error}", reason="invalid_target") from error
    if url.scheme not in ("http", "https") or not url.host:
        raise PermanentError("the URL must be https://host/...", reason="invalid_target")
    if url.scheme == "http" and not allow_insecure:
        raise PermanentError("plain http:// needs allow_insecure", reason="insecure_target")
    return url


async def checked_addresses(url: httpx.URL, allow_private: bool) -> list[IPAddress]:
    port = url.port or (443 if url.scheme == "https" else 80)
    host = url.raw_host.decode("ascii")
    try:
        return await safe_addresses(host, port, allow_private)
    except UnsafeTarget as error:
        raise PermanentError(str(error), reason="private_target") from error
    except (OSError, UnicodeError) as error:  # socket.gaierror: DNS may recover
        raise TransientError(f"cannot resolve {url.host}: {error}") from error


async def post(
    client: httpx.AsyncClient,
    provider: str,
    url: httpx.URL,
    addresses: list[IPAddress],
    body: bytes,
    headers: dict[str, str],
) -> Answer:
    """POST to the first address that takes the connection (the ones that refused got
    nothing, so trying the next cannot send twice)."""
    last: httpx.ConnectError | None = None
    for address in addresses:
        try:
            return await _post_to(client, url, address, body, headers)
        except httpx.ConnectError as error:
            last = error
        except (httpx.InvalidURL, httpx.UnsupportedProtocol, ValueError) as error:
            # The HTTP client cannot make this request: it never will, so it is not retried.
            raise PermanentError(
                f"{provider}: the URL is refused by the HTTP client: {error}",
                reason="invalid_target",
            ) from error
        except httpx.TransportError as error:
            raise no_answer(provider, error) from error
    raise TransientError(f"{provider} unreachable: {last!r}") from last


async def _post_to(
    client: httpx.AsyncClient,
    url: httpx.URL,
    address: IPAddress,
    body: bytes,
    headers: dict[str, str],
) -> Answer:
    pinned = url.copy_with(host=str(address))
    extensions: dict[str, Any] = {}
    if url.scheme == "https":
        extensions["sni_hostname"] = url.raw_host.decode("ascii")
    request_headers = {**headers, "host": url.netloc.decode("ascii")}
    async with client.stream(
        "POST", pinned, content=body, headers=request_headers, extensions=extensions
    ) as response:
        read = bytearray()
        async for chunk in response.aiter_raw():
            read += chunk
            if len(read) >= MAX_RESPONSE_BYTES:
                break
        return Answer(response.status_code, response.headers, bytes(read[:MAX_RESPONSE_BYTES]))
