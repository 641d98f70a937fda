"""Intake through tidings' HTTP API: one notification per request, and batches.

The load comes from aiohttp clients in the bench process, each holding one keep-alive
connection. The clients share the machine's two CPUs with the API and PostgreSQL, so their
own CPU per request is taken from what is measured: aiohttp's is about a quarter of a
millisecond, where httpx's was about 1.2 ms (and several ms with one pool shared by 32
requests). The baselines have no client at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass

import aiohttp

from bench.workload import Item


@dataclass(frozen=True)
class Client:
    """One HTTP client with one connection to the API."""

    session: aiohttp.ClientSession
    base_url: str

    async def post(self, path: str, body: object, headers: dict[str, str]) -> tuple[int, bytes]:
        data = json.dumps(body).encode()
        headers = {**headers, "content-type": "application/json"}
        async with self.session.post(self.base_url + path, data=data, headers=headers) as answer:
            return answer.status, await answer.read()


@contextlib.asynccontextmanager
async def clients(base_url: str, count: int) -> AsyncIterator[list[Client]]:
    """``count`` clients, each with its connection already open."""
    async with contextlib.AsyncExitStack() as stack:
        made = []
        for _ in range(count):
            connector = aiohttp.TCPConnector(limit=1)
            timeout = aiohttp.ClientTimeout(total=120)
            session = aiohttp.ClientSession(connector=connector, timeout=timeout)
            made.append(Client(await stack.enter_async_context(session), base_url))
        for client in made:
            async with client.session.get(base_url + "/healthz") as answer:
                answer.raise_for_status()
        yield made


async def post_singles(http: Sequence[Client], items: Sequence[Item]) -> float:
    """POST every item on its own, one request at a time per client; seconds until all are
    answered 202."""
    queue = iter(items)

    async def worker(client: Client) -> None:
        for item in queue:
            headers = {"Idempotency-Key": item.key}
            status, text = await client.post("/v1/notifications", item.body, headers)
            if status != 202:
                raise RuntimeError(f"single POST: {status} {text[:300]!r}")

    started = time.perf_counter()
    await asyncio.gather(*(worker(client) for client in http))
    return time.perf_counter() - started


def chunks(items: Sequence[Item], size: int) -> Iterator[Sequence[Item]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


async def post_batches(http: Sequence[Client], items: Sequence[Item], size: int) -> float:
    """POST the items in batches of ``size``, one batch at a time per client; seconds until
    every batch is answered with all its items accepted."""
    batches = chunks(items, size)
    bodies = [{"notifications": [item.batch_body() for item in batch]} for batch in batches]
    queue = iter(bodies)

    async def worker(client: Client) -> None:
        for body in queue:
            status, text = await client.post("/v1/notifications/batch", body, {})
            if status != 200:
                raise RuntimeError(f"batch POST: {status} {text[:300]!r}")
            refused = [r for r in json.loads(text)["results"] if r["status"] != "accepted"]
            if refused:
                raise RuntimeError(f"batch POST: {len(refused)} items refused, e.g. {refused[0]}")

    started = time.perf_counter()
    await asyncio.gather(*(worker(client) for client in http))
    return time.perf_counter() - started
