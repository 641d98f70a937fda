"""A TCP forwarder the tests control, between tidings processes and a server they share
with other tests (PostgreSQL): ``cut()`` drops every connection and refuses new ones, as a
stopped server does, ``restore()`` listens again on the same port. It runs its own event
loop in a thread, so a test's loop being busy never stalls the traffic."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
from collections.abc import Coroutine
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from tests.processes import free_port


@dataclass
class TcpProxy:
    target_port: int
    target_host: str = "127.0.0.1"
    port: int = field(default_factory=free_port)
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None
    _server: asyncio.Server | None = None
    _writers: set[asyncio.StreamWriter] = field(default_factory=set)
    accepted: int = 0  # connections forwarded since start

    def start(self) -> TcpProxy:
        """Start the loop's thread and listen."""
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(target=loop.run_forever, name="tcp-proxy", daemon=True)
        self._thread.start()
        self._call(self._listen())
        return self

    def cut(self) -> None:
        """Stop listening (new connections are refused) and drop every open one."""
        self._call(self._cut())

    def restore(self) -> None:
        self._call(self._listen())

    def close(self) -> None:
        if self._loop is None:
            return
        self.cut()
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(5)
        self._loop.close()
        self._loop = None

    def _call(self, work: Coroutine[Any, Any, None]) -> None:
        assert self._loop is not None, "start() first"
        done: Future[None] = asyncio.run_coroutine_threadsafe(work, self._loop)
        done.result(10)

    async def _listen(self) -> None:
        if self._server is None:
            self._server = await asyncio.start_server(
                self._forward, "127.0.0.1", self.port, reuse_address=True
            )

    async def _cut(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for writer in list(self._writers):
            _abort(writer)
        self._writers.clear()
        if server is not None:
            with contextlib.suppress(Exception):
                await server.wait_closed()

    async def _forward(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(self.target_host, self.target_port)
        except OSError:
            _abort(writer)
            return
        self.accepted += 1
        self._writers.update((writer, up_writer))
        try:
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        finally:
            for each in (writer, up_writer):
                self._writers.discard(each)
                _abort(each)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (OSError, asyncio.IncompleteReadError):
        pass
    finally:
        _abort(writer)


def _abort(writer: asyncio.StreamWriter) -> None:
    """Close at once, as a dead server's connection ends (no orderly goodbye)."""
    transport = writer.transport
    if not transport.is_closing():
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                # A reset, not a FIN: the client learns at once that the server is gone.
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        transport.abort()
