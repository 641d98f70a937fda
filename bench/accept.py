"""Intake through tidings' HTTP API: one notification per request, and batches.

Each concurrent client is an ``httpx.AsyncClient`` of its own holding one keep-alive
connection: one client shared by 32 concurrent requests spends several milliseconds of CPU
per request in its connection pool (measured: ~5 ms against ~1.2 ms), CPU the bench would
take from the server on the same machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Iterator, Sequence

import httpx

from bench.workload import Item


@contextlib.asynccontextmanager
async def clients(base_url: str, count: int) -> AsyncIterator[list[httpx.AsyncClient]]:
    """``count`` clients, each with its connection already open."""
    async with contextlib.AsyncExitStack() as stack:
        made = []
        for _ in range(count):
            limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
            http = httpx.AsyncClient(base_url=base_url, limits=limits, timeout=120.0)
            made.append(await stack.enter_async_context(http))
        for http in made:
            (await http.get("/healthz")).raise_for_status()
        yield made


async def post_singles(http: Sequence[httpx.AsyncClient], items: Sequence[Item]) -> float:
    """POST every item on its own, one request at a time per client; seconds until all are
    answered 202."""
    queue = iter(items)

    async def worker(client: httpx.AsyncClient) -> None:
        for item in queue:
            headers = {"Idempotency-Key": item.key}
            response = await client.post("/v1/notifications", json=item.body, headers=headers)
            if response.status_code != 202:
                raise RuntimeError(f"single POST: {response.status_code} {response.text[:300]}")

    started = time.perf_counter()
    await asyncio.gather(*(worker(client) for client in http))
    return time.perf_counter() - started


def chunks(items: Sequence[Item], size: int) -> Iterator[Sequence[Item]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


async def post_batches(
    http: Sequence[httpx.AsyncClient], items: Sequence[Item], size: int
) -> float:
    """POST the items in batches of ``size``, one batch at a time per client; seconds until
    every batch is answered with all its items accepted."""
    batches = chunks(items, size)
    bodies = [{"notifications": [item.batch_body() for item in batch]} for batch in batches]
    queue = iter(bodies)

    async def worker(client: httpx.AsyncClient) -> None:
        for body in queue:
            response = await client.post("/v1/notifications/batch", json=body)
            if response.status_code != 200:
                raise RuntimeError(f"batch POST: {response.status_code} {response.text[:300]}")
            refused = [r for r in response.json()["results"] if r["status"] != "accepted"]
            if refused:
                raise RuntimeError(f"batch POST: {len(refused)} items refused, e.g. {refused[0]}")

    started = time.perf_counter()
    await asyncio.gather(*(worker(client) for client in http))
    return time.perf_counter() - started
