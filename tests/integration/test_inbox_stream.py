"""The inbox's live stream (docs/inbox.md, Live updates) over a real socket: a new message
within a second, across processes on PostgreSQL (NOTIFY) and within one on SQLite;
Last-Event-ID resumes; marks send counts; heartbeats; caps per user and per process (429);
tokens in the query for EventSource."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
import uvicorn

from tests.helpers import eventually
from tests.processes import free_port
from tidings.api.app import create_app
from tidings.api.auth import issue_key
from tidings.ids import new_id
from tidings.service import Service
from tidings.settings import Settings
from tidings.store import api_keys, inbox, users


@pytest.fixture
def settings(settings: Settings) -> Settings:
    settings.inbox.heartbeat_seconds = 30.0  # a wake-up, not a heartbeat, must bring news
    settings.inbox.max_streams_per_user = 2
    settings.inbox.max_streams_per_process = 3
    return settings


@pytest.fixture(autouse=True)
async def users_registered(service: Service) -> None:
    """Only registered users have a feed."""
    for user in ("ana", "bob", "eve"):
        await users.put_user_settings(service.db, user, {}, datetime.now(UTC))


@contextlib.asynccontextmanager
async def serving(service: Service) -> AsyncIterator[str]:
    port = free_port()
    config = uvicorn.Config(create_app(service), port=port, log_level="warning", lifespan="off")
    config.timeout_graceful_shutdown = 1
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    try:
        await eventually(lambda: server.started)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


@dataclass
class Stream:
    """The events of one open stream, as they come."""

    response: httpx.Response
    events: asyncio.Queue[tuple[str, Any, str | None]] = field(default_factory=asyncio.Queue)
    comments: list[str] = field(default_factory=list)

    async def read(self) -> None:
        name, data, event_id = "message", "", None
        async for line in self.response.aiter_lines():
            if line.startswith(":"):
                self.comments.append(line)
            elif line.startswith("event: "):
                name = line.removeprefix("event: ")
            elif line.startswith("data: "):
                data = line.removeprefix("data: ")
            elif line.startswith("id: "):
                event_id = line.removeprefix("id: ")
            elif line == "" and data:
                await self.events.put((name, json.loads(data), event_id))
                name, data, event_id = "message", "", None

    async def next(self, within: float = 5.0) -> tuple[str, Any, str | None]:
        async with asyncio.timeout(within):
            return await self.events.get()


@contextlib.asynccontextmanager
async def opened(
    client: httpx.AsyncClient, url: str, headers: dict[str, str] | None = None
) -> AsyncIterator[Stream]:
    async with client.stream("GET", url, headers=headers) as response:
        assert response.status_code == 200, await response.aread()
        assert response.headers["content-type"].startswith("text/event-stream")
        stream = Stream(response)
        reader = asyncio.create_task(stream.read())
        try:
            yield stream
        finally:
            reader.cancel()
            with contextlib.suppress(BaseException):
                await reader


def _message(user: str, n: int = 0) -> inbox.NewMessage:
    return inbox.NewMessage(new_id(), new_id(), user, "promo", "marketing", f"t{n}", "b", {})


async def test_a_new_message_reaches_an_open_stream_within_a_second(
    service: Service, settings: Settings
) -> None:
    other = Service.from_settings(settings)  # another process's writes, its own pool
    try:
        async with serving(service) as base, httpx.AsyncClient(timeout=10) as client:
            async with opened(client, f"{base}/v1/users/ana/inbox/stream") as stream:
                assert await stream.next() == (
                    "counts",
                    {"unseen": 0, "unread": 0, "total": 0},
                    None,
                )
                await asyncio.sleep(0.3)  # the LISTEN connection (PostgreSQL) is up
                started = time.monotonic()
                stored = await inbox.store(other.db, _message("ana"), datetime.now(UTC))
                assert stored is not None
                if not service.db.dialect.notifies:
                    service.inbox_wakeup.wake("ana")  # SQLite: one process stores and streams
                name, data, event_id = await stream.next(within=1.0)
                while name == "counts":  # the LISTEN connection's first wake-up, if late
                    name, data, event_id = await stream.next(within=1.0)
                took = time.monotonic() - started
                assert (name, data["id"], event_id) == ("message", str(stored.id), str(stored.id))
                assert data["subject"] == "t0" and data["readAt"] is None
                counts = {"unseen": 1, "unread": 1, "total": 1}
                assert (await stream.next())[:2] == ("counts", counts)
                assert took < 1.0
                # A message of another user wakes nothing here.
                await inbox.store(other.db, _message("bob"), datetime.now(UTC))
                with pytest.raises(TimeoutError):
                    await stream.next(within=0.5)
    finally:
        await other.close()


async def test_marks_send_counts_and_last_event_id_resumes(service: Service) -> None:
    ids = []
    for n in range(3):
        stored = await inbox.store(service.db, _message("ana", n), datetime.now(UTC))
        assert stored is not None
        ids.append(str(stored.id))
    async with serving(service) as base, httpx.AsyncClient(timeout=10) as client:
        url = f"{base}/v1/users/ana/inbox/stream"
        async with opened(client, url, {"Last-Event-ID": ids[0]}) as stream:
            assert (await stream.next())[0] == "counts"
            resumed = [event for event in [await stream.next() for _ in range(2)]]
            assert [(name, event_id) for name, _, event_id in resumed] == [
                ("message", ids[1]),
                ("message", ids[2]),
            ]
            marked = await client.post(f"{base}/v1/users/ana/inbox/{ids[2]}/read")
            assert marked.status_code == 200
            # (PostgreSQL: the LISTEN connection's first wake-up may send the same counts
            # again first.)
            want = {"unseen": 3, "unread": 2, "total": 3}
            async with asyncio.timeout(1.0):
                while (found := await stream.next()) != ("counts", want, None):
                    assert found[0] == "counts", found
        bad = await client.get(url, headers={"Last-Event-ID": "nonsense"})
        assert bad.status_code == 422 and bad.json()["error"]["field"] == "Last-Event-ID"


async def test_heartbeats_keep_an_idle_stream_alive(service: Service, settings: Settings) -> None:
    settings.inbox.heartbeat_seconds = 0.1
    async with serving(service) as base, httpx.AsyncClient(timeout=10) as client:
        async with opened(client, f"{base}/v1/users/ana/inbox/stream") as stream:
            await stream.next()
            await eventually(lambda: len(stream.comments) >= 2, within=3)
    assert stream.comments[0] == ": heartbeat"


async def test_streams_are_capped_per_user_and_per_process(service: Service) -> None:
    async with serving(service) as base, httpx.AsyncClient(timeout=10) as client:
        ana = f"{base}/v1/users/ana/inbox/stream"
        async with opened(client, ana) as first, opened(client, ana):
            await first.next()
            third = await client.get(ana)
            assert third.status_code == 429, third.text
            assert third.json()["error"]["code"] == "too_many_streams"
            assert third.headers["retry-after"] == "5"
            async with opened(client, f"{base}/v1/users/bob/inbox/stream"):
                full = await client.get(f"{base}/v1/users/eve/inbox/stream")
                assert full.status_code == 429 and "process" in full.text
        # Closed streams make room again.
        await eventually(lambda: service.inbox_wakeup.open_streams == 0)
        async with opened(client, ana) as again:
            assert (await again.next())[0] == "counts"


async def test_the_stream_takes_a_user_token_in_the_query(
    service: Service, settings: Settings
) -> None:
    token = service.inbox_tokens.mint("ana", datetime.now(UTC)).token
    bobs = service.inbox_tokens.mint("bob", datetime.now(UTC)).token
    # Keys exist: nothing is open without a key or a token.
    _key, stored = issue_key("ops", ["admin"], "default")
    await api_keys.insert(service.db, stored)
    async with serving(service) as base, httpx.AsyncClient(timeout=10) as client:
        url = f"{base}/v1/users/ana/inbox/stream"
        assert (await client.get(url)).status_code == 401
        async with opened(client, f"{url}?token={token}") as stream:
            assert (await stream.next())[0] == "counts"
        assert (await client.get(f"{url}?token={bobs}")).status_code == 403
        assert (await client.get(f"{url}?token={token}x")).status_code == 401
