"""``python -m bench.engagement``: how fast the open pixel and the click redirect answer.

One ``tidings api`` process on a scratch PostgreSQL database; a real delivery to open and
click. For each route, requests one at a time (latency: median and p99) and from 16
concurrent clients (throughput), in rounds that alternate with ``GET /healthz`` (the same
server doing no work: the baseline). Both tracking routes write an event per request.
Writes the ``engagement`` section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from bench import database, sections
from bench.api_server import running_api
from bench.config import BenchConfig
from bench.workload import TYPE_NAME
from tidings.tracking.engagement_links import EngagementLinks

DEFAULT_OUT = Path("docs/benchmarks.md")
SECTION = "engagement"
SECRET = "bench-engagement-secret"
CONCURRENCY = 16


@dataclass
class Route:
    name: str
    path: str
    latencies_ms: list[float] = field(default_factory=list)
    rates: list[float] = field(default_factory=list)


async def one_delivery(client: httpx.AsyncClient) -> uuid.UUID:
    body = {"type": TYPE_NAME, "to": {"email": "bench@example.com"}, "channels": ["email"]}
    answer = await client.post("/v1/notifications", json=body, headers={"Idempotency-Key": "e1"})
    answer.raise_for_status()
    return uuid.UUID(answer.json()["deliveries"][0]["id"])


async def latencies(client: httpx.AsyncClient, path: str, count: int) -> list[float]:
    found = []
    for _ in range(count):
        start = time.perf_counter()
        answer = await client.get(path)
        found.append((time.perf_counter() - start) * 1000)
        assert answer.status_code in (200, 302), (path, answer.status_code)
    return found


async def rate(client: httpx.AsyncClient, path: str, count: int) -> float:
    per_client = count // CONCURRENCY

    async def one() -> None:
        for _ in range(per_client):
            assert (await client.get(path)).status_code in (200, 302)

    start = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(CONCURRENCY)))
    return per_client * CONCURRENCY / (time.perf_counter() - start)


async def measure(config: BenchConfig, requests: int, rounds: int) -> list[Route]:
    await database.create(config)
    try:
        with tempfile.TemporaryDirectory() as scratch:
            log = Path(scratch) / "api.log"
            env = {"TIDINGS_SECRET_KEY": SECRET}
            async with running_api(config.database_url, log, env) as base:
                limits = httpx.Limits(max_connections=CONCURRENCY)
                async with httpx.AsyncClient(base_url=base, limits=limits) as client:
                    links = EngagementLinks(SECRET, base, 365)
                    delivery = await one_delivery(client)
                    routes = [
                        Route("GET /healthz (baseline)", "/healthz"),
                        Route("GET /t/o/{token} (open pixel)", _path(links.open_url(delivery))),
                        Route(
                            "GET /t/c/{token} (click)",
                            _path(links.click_url(delivery, "https://shop.example/sale")),
                        ),
                    ]
                    for route in routes:  # warm up connections, caches and plans
                        await latencies(client, route.path, 50)
                    for _ in range(rounds):
                        for route in routes:
                            route.latencies_ms += await latencies(client, route.path, requests)
                            route.rates.append(await rate(client, route.path, requests))
    finally:
        await database.drop(config)
    return routes


def _path(url: str) -> str:
    return "/" + url.split("/", 3)[3]


def p99(values: list[float]) -> float:
    return sorted(values)[int(len(values) * 0.99) - 1]


def table(routes: list[Route]) -> str:
    baseline = statistics.median(routes[0].rates)
    lines = [
        "| route | median latency | p99 latency | requests/s, 16 clients | vs /healthz |",
        "|---|---:|---:|---:|---:|",
    ]
    for route in routes:
        speed = statistics.median(route.rates)
        lines.append(
            f"| {route.name} | {statistics.median(route.latencies_ms):.2f} ms "
            f"| {p99(route.latencies_ms):.2f} ms | {speed:,.0f} | {speed / baseline:.2f} |"
        )
    return "\n".join(lines)


def section(routes: list[Route], command: str, requests: int, rounds: int) -> str:
    return f"""## Opens and clicks: the pixel and the redirect

Command: `{command}` ({rounds} rounds of {requests:,} requests per route, one at a time for
latency and from {CONCURRENCY} concurrent clients for throughput; one `tidings api` process
on PostgreSQL, the client in another process on the same machine). Each pixel and click
request writes its event before answering; `/healthz` (no work) is the baseline.

{table(routes)}
"""


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.engagement", description=__doc__)
    parser.add_argument("--requests", type=int, default=2000, help="requests per route and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    config = BenchConfig(database="tidings_bench_engagement")
    routes = asyncio.run(measure(config, args.requests, args.rounds))
    command = shlex.join(["python", "-m", "bench.engagement", *sys.argv[1:]])
    body = section(routes, command, args.requests, args.rounds)
    print(body)
    text = args.out.read_text() if args.out.exists() else "# Benchmarks\n"
    args.out.write_text(sections.replace(text, SECTION, body))


if __name__ == "__main__":
    main()
