"""The provider accounts' HTTP/1.1 transport (providers/_http.py) against a raw
socket server: connections kept and bounded, and each failure reported in the phase it
happened, since that phase decides whether a request may have been sent."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import httpx
import pytest

from tests.processes import free_port
from tidings.providers._http import no_answer, pooled_client

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@dataclass
class RawServer:
    """An HTTP/1.1 server of a few lines: it counts connections and requests."""

    answer: str = "ok"  # ok | silent | hang_up | big
    connections: int = 0
    requests: list[bytes] = field(default_factory=list)
    port: int = 0
    handlers: list[asyncio.Task[None]] = field(default_factory=list)
    writers: list[asyncio.StreamWriter] = field(default_factory=list)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.writers.append(writer)
        task = asyncio.current_task()
        assert task is not None
        self.handlers.append(task)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = _content_length(head)
                body = await reader.readexactly(length) if length else b""
                self.requests.append(head + body)
                if self.answer == "silent":
                    await asyncio.sleep(3600)
                if self.answer == "hang_up":
                    writer.close()
                    return
                payload = b"x" * 1_000_000 if self.answer == "big" else b'{"ok":true}'
                writer.write(
                    b"HTTP/1.1 202 Accepted\r\ncontent-type: application/json\r\n"
                    + b"x-message-id: m-%d\r\n" % len(self.requests)
                    + b"content-length: %d\r\n\r\n" % len(payload)
                    + payload
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()


def _content_length(head: bytes) -> int:
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    return 0


@pytest.fixture
async def server() -> AsyncIterator[RawServer]:
    raw = RawServer()
    listening = await asyncio.start_server(raw.handle, "127.0.0.1", 0)
    raw.port = listening.sockets[0].getsockname()[1]
    async with listening:
        yield raw
        listening.close()
        for handler in raw.handlers:
            handler.cancel()
        for writer in raw.writers:
            writer.close()
        await asyncio.gather(*raw.handlers, return_exceptions=True)


async def test_connections_are_kept_and_bounded(server: RawServer) -> None:
    client = pooled_client(4, base_url=f"http://127.0.0.1:{server.port}", timeout=5)
    async with client:
        answers = await asyncio.gather(*(client.post("/send", json={"n": n}) for n in range(40)))
    assert [a.status_code for a in answers] == [202] * 40
    assert {a.headers["x-message-id"] for a in answers} == {f"m-{n}" for n in range(1, 41)}
    assert answers[0].json() == {"ok": True}
    assert len(server.requests) == 40
    assert server.connections <= 4


async def test_headers_and_body_arrive_as_httpx_built_them(server: RawServer) -> None:
    async with pooled_client(1, timeout=5, headers={"Authorization": "Bearer k"}) as client:
        answer = await client.post(
            f"http://127.0.0.1:{server.port}/v1/x?a=%C3%A9",
            content=b"body",
            headers={"Host": "provider.example", "content-type": "text/plain"},
        )
    assert answer.status_code == 202
    sent = server.requests[0]
    assert sent.startswith(b"POST /v1/x?a=%C3%A9 HTTP/1.1\r\n")
    head = sent.lower()
    assert b"\r\nhost: provider.example\r\n" in head
    assert b"\r\nauthorization: bearer k\r\n" in head
    assert b"\r\ncontent-type: text/plain\r\n" in head
    assert head.count(b"\r\ncontent-length:") == 1
    assert sent.endswith(b"\r\n\r\nbody")


async def test_a_refused_connection_was_never_sent() -> None:
    async with pooled_client(2, timeout=5) as client:
        with pytest.raises(httpx.ConnectError) as caught:
            await client.post(f"http://127.0.0.1:{free_port()}/send", json={})
    assert not no_answer("p", caught.value).ambiguous


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        ("silent", httpx.ReadTimeout),  # no answer within the read timeout
        ("hang_up", httpx.RemoteProtocolError),  # the connection closed before the answer
    ],
)
async def test_no_answer_after_the_request_left_is_perhaps_sent(
    server: RawServer, answer: str, error: type[httpx.TransportError]
) -> None:
    server.answer = answer
    async with pooled_client(2, timeout=httpx.Timeout(5, read=0.3)) as client:
        with pytest.raises(error) as caught:
            await client.post(f"http://127.0.0.1:{server.port}/send", json={})
    assert len(server.requests) == 1
    assert no_answer("p", caught.value).ambiguous


async def test_waiting_for_a_free_connection_too_long_was_never_sent(server: RawServer) -> None:
    server.answer = "silent"
    timeout = httpx.Timeout(5, pool=0.3)
    async with pooled_client(1, timeout=timeout) as client:
        first = asyncio.create_task(client.post(f"http://127.0.0.1:{server.port}/a", json={}))
        await asyncio.sleep(0.1)
        with pytest.raises(httpx.ConnectTimeout) as caught:
            await client.post(f"http://127.0.0.1:{server.port}/b", json={})
        first.cancel()
    assert not no_answer("p", caught.value).ambiguous
    assert len(server.requests) == 1  # /b never left


async def test_a_body_read_in_part_closes_its_connection(server: RawServer) -> None:
    server.answer = "big"
    async with pooled_client(1, timeout=5) as client:
        url = f"http://127.0.0.1:{server.port}/send"
        async with client.stream("POST", url, content=b"x") as response:
            async for _chunk in response.aiter_raw():
                break
        server.answer = "ok"
        again = await client.post(url, content=b"y")
    assert again.status_code == 202
    assert server.connections == 2  # the half-read one was not reused
