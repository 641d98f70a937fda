"""A LOW backlog longer than the queue lease, through the Kafka transport (issue 23's
trial: ``max_queued`` 20,000 at a 30/s LOW share is 670 s of work against a 300 s lease).

``--rows`` due LOW email deliveries (plain SQL, as bench/kafka_relay.py), one relay and one
worker in this process, a fresh tansu broker, and an account of ``--rate`` per second of
which LOW has its default share (0.6: 30/s of 50/s); the provider answers at once
(``ScriptedProvider``: what is measured is the transport, not a provider). Timed until every
delivery is SENT; counted: queue leases expired (``queue_expired`` events), tickets
published (more than the rows: tickets published again), sends per delivery, the most
QUEUED at once and the drain rate the relay measured (transport/pacing.py).

    python -m bench.kafka_backlog                     # the full run, about 12 minutes
    python -m bench.kafka_backlog --rows 2000 --lease 20 --no-write

Writes its figures as the ``kafka-backlog`` section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg

from bench import baseline, database, sections
from bench.accept import chunks
from bench.config import BenchConfig
from bench.kafka_procs import procs, start_broker
from bench.workload import items
from tidings.assembly import assemble_dispatcher
from tidings.background.relay import Relay
from tidings.dispatch.lanes.kafka import WorkerPlan
from tidings.priorities import Priority
from tidings.providers.accounts import AccountSettings
from tidings.providers.chains import ProviderSet
from tidings.providers.testing import ScriptedProvider
from tidings.service import Service
from tidings.settings import Settings

SECTION = "kafka-backlog"
OUT = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
SAMPLE_SECONDS = 5.0


@dataclass
class Figures:
    rows: int
    rate: float
    lease: float
    seconds: float = 0.0
    published: int = 0
    sent: int = 0
    repeats: int = 0  # sends beyond one per delivery
    queue_expired: int = 0
    most_queued: int = 0
    drain: dict[str, dict[str, float]] = field(default_factory=dict)


async def measure(args: argparse.Namespace) -> Figures:
    config = BenchConfig(database="tidings_bench_backlog", admin_url=args.admin_url)
    await database.create(config)
    figures = Figures(args.rows, args.rate, args.lease)
    try:
        pool: asyncpg.Pool = await asyncpg.create_pool(config.database_url, min_size=1, max_size=2)
        try:
            await _backlog(pool, args.rows)
            with tempfile.TemporaryDirectory(prefix="tidings-bench-backlog-") as scratch:
                with procs(Path(scratch)) as running:
                    await _drain(config.database_url, start_broker(running), pool, figures)
        finally:
            await pool.close()
    finally:
        await database.drop(config)
    return figures


async def _backlog(pool: asyncpg.Pool, count: int) -> None:
    """``count`` due email deliveries, made LOW."""
    async with pool.acquire() as conn:
        for batch in chunks(items(count, "backlog"), 1_000):
            await baseline.insert_batch(conn, batch)
        await conn.execute("UPDATE notification SET priority = 'low'")
        await conn.execute("UPDATE delivery SET priority = 'low'")
    await database.settle(pool)


async def _drain(url: str, bootstrap: str, pool: asyncpg.Pool, figures: Figures) -> None:
    kafka = {"queue_lease_seconds": figures.lease}
    settings = Settings(database_url=url, transport="kafka", kafka_bootstrap=bootstrap, kafka=kafka)
    service = Service.from_settings(settings)
    provider = ScriptedProvider("account")
    account = AccountSettings(kind="scripted", rate_per_second=figures.rate)
    providers = ProviderSet({"account": provider}, {"email": ["account"]}, {"account": account})
    plan = WorkerPlan(bootstrap, settings.kafka, priorities=[Priority.LOW])
    relay = Relay(service)
    stop = asyncio.Event()
    started = time.perf_counter()
    jobs = [
        asyncio.create_task(relay.run(stop)),
        asyncio.create_task(assemble_dispatcher(service, providers, worker=plan).run(stop)),
    ]
    try:
        await _until_sent(pool, figures)
        figures.seconds = time.perf_counter() - started
    finally:
        stop.set()
        await asyncio.wait_for(asyncio.gather(*jobs), timeout=120)
        await service.close()
    figures.published = relay.published
    figures.drain = relay.pacing.snapshot()
    calls = Counter(call.delivery_id for call in provider.completed)
    figures.sent = len(calls)
    figures.repeats = sum(calls.values()) - len(calls)
    async with pool.acquire() as conn:
        query = "SELECT count(*) FROM delivery_event WHERE kind = 'queue_expired'"
        figures.queue_expired = int(await conn.fetchval(query))


async def _until_sent(pool: asyncpg.Pool, figures: Figures) -> None:
    query = "SELECT status, count(*) FROM delivery GROUP BY status"
    while True:
        async with pool.acquire() as conn:
            counts = {r["status"]: int(r["count"]) for r in await conn.fetch(query)}
        figures.most_queued = max(figures.most_queued, counts.get("QUEUED", 0))
        print(f"  {counts}", flush=True)
        if counts.get("SENT", 0) >= figures.rows:
            return
        await asyncio.sleep(SAMPLE_SECONDS)


def section(figures: Figures, load: str) -> str:
    low = figures.rate * 0.6
    drain = figures.drain.get("low.email", {})
    header = [
        "rows",
        "drained in",
        "rate",
        "tickets published",
        "queue leases expired",
        "sends beyond one",
        "most QUEUED",
        "drain rate measured, topic cap",
    ]
    row = [
        f"{figures.rows:,}",
        f"{figures.seconds:.0f} s",
        f"{figures.rows / figures.seconds:.1f}/s",
        f"{figures.published:,}",
        str(figures.queue_expired),
        str(figures.repeats),
        f"{figures.most_queued:,}",
        f"{drain.get('drainPerSecond', 0):g}/s, {int(drain.get('cap', 0)):,}",
    ]
    table = "\n".join(
        "| " + " | ".join(cells) + " |" for cells in (header, ["---"] * len(header), row)
    )
    work = figures.rows / low
    return f"""## Kafka transport: a LOW backlog longer than the queue lease

`python -m bench.kafka_backlog` (`make bench-kafka-backlog`): {figures.rows:,} due LOW emails,
one relay and one worker in one process, a fresh tansu broker, an account of {figures.rate:g}/s
of which LOW has {low:g}/s, a queue lease of {figures.lease:g} s.
The backlog is {work:.0f} s of work, {work / figures.lease:.1f} queue leases.
The relay keeps what the worker drains in half a lease in the topic (transport/pacing.py).

{table}

Before pacing the relay published the whole `max_queued` at once: in the scaled test
(`tests/system/test_kafka_pacing.py`: 2,000 rows, 30/s, a 20 s lease) 2,961 queue leases
expired and their rows were published again; with it, none. Load average at start
{load}, at the end {os.getloadavg()[0]:.1f} (2 cores shared).
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000, help="LOW deliveries [20000]")
    parser.add_argument("--rate", type=float, default=50.0, help="account rate/s [50]")
    parser.add_argument("--lease", type=float, default=300.0, help="queue lease, s [300]")
    parser.add_argument("--admin-url", default=BenchConfig().admin_url)
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args(argv)
    if args.rows < 1 or args.rate <= 0 or args.lease <= 0:
        raise SystemExit("--rows, --rate and --lease must be positive")
    load = f"{os.getloadavg()[0]:.1f}"
    figures = asyncio.run(measure(args))
    body = section(figures, load)
    print(body)
    if not args.no_write:
        text = OUT.read_text() if OUT.exists() else "# Benchmarks\n"
        OUT.write_text(sections.replace(text, SECTION, body))
        print(f"written to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
