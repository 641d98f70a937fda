"""Relay throughput against the raw claim: ``deliveries`` due NORMAL email deliveries,
pre-inserted in plain SQL, moved PENDING -> QUEUED

- by tidings' ``Relay`` in this process (``Relay(service).run``, no worker consuming,
  ``kafka.max_queued`` far above the backlog and ``kafka.paced`` off, ``kafka.relay_batch``
  = ``batch``), publishing a ticket per delivery to a fresh tansu broker; its producer is
  started and the topics made before the clock starts; timed until no delivery is PENDING
  (every batch committed);
- by plain asyncpg on one connection: per transaction the relay's claim (the same ``SELECT
  ... FOR UPDATE OF d SKIP LOCKED LIMIT batch`` and ``UPDATE ... SET status = 'QUEUED'``),
  with nothing published, until the claim finds nothing.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import asyncpg

from bench import baseline, database
from bench.accept import chunks
from bench.kafka_procs import procs, start_broker
from bench.workload import PRIORITY, items
from tidings.background.relay import Relay
from tidings.clock import utcnow
from tidings.service import Service
from tidings.settings import Settings

# The relay's statements (tidings.store.queue), written out: the baseline runs plain SQL.
DUE = """
SELECT d.id, d.channel, n.user_id
FROM delivery AS d JOIN notification AS n ON n.id = d.notification_id
WHERE d.status = 'PENDING' AND d.priority = $1 AND d.next_attempt_at <= $2
ORDER BY d.next_attempt_at
LIMIT $3
FOR UPDATE OF d SKIP LOCKED
"""
MARK_QUEUED = """
UPDATE delivery SET status = 'QUEUED', lease_until = $2, updated_at = $3
WHERE id = ANY($1::uuid[])
"""
_PENDING = "SELECT EXISTS (SELECT 1 FROM delivery WHERE status = 'PENDING')"
QUEUE_LEASE = timedelta(seconds=300)  # kafka.queue_lease_seconds' default


@dataclass
class RelayFigures:
    deliveries: int
    batch: int
    relay: list[float] = field(default_factory=list)  # seconds per run
    raw: list[float] = field(default_factory=list)

    def rate(self, seconds: list[float]) -> float:
        return self.deliveries / statistics.median(seconds)

    @property
    def ratio(self) -> float:
        """The relay's rate over the raw claim's."""
        return statistics.median(self.raw) / statistics.median(self.relay)


async def measure(
    url: str, pool: asyncpg.Pool, scratch: Path, deliveries: int, batch: int, repeat: int
) -> RelayFigures:
    figures = RelayFigures(deliveries, batch)
    for attempt in range(repeat):
        await _backlog(pool, deliveries, f"relay-{attempt}")
        figures.relay.append(await relay_run(url, pool, scratch, deliveries, batch))
        await _backlog(pool, deliveries, f"raw-{attempt}")
        figures.raw.append(await raw_run(pool, deliveries, batch))
        print(
            f"relay {attempt + 1}/{repeat}: tidings relay {deliveries / figures.relay[-1]:,.0f}/s,"
            f" raw claim {deliveries / figures.raw[-1]:,.0f}/s",
            flush=True,
        )
    return figures


async def _backlog(pool: asyncpg.Pool, count: int, prefix: str) -> None:
    """Empty tables, then ``count`` due NORMAL email deliveries (plain SQL), settled."""
    await database.reset(pool)
    async with pool.acquire() as conn:
        for batch in chunks(items(count, prefix), 1_000):
            await baseline.insert_batch(conn, batch)
    await database.settle(pool)


async def relay_run(
    url: str, pool: asyncpg.Pool, scratch: Path, deliveries: int, batch: int
) -> float:
    """Seconds from the relay's start until nothing is PENDING."""
    # No worker drains the topics: unpaced, only max_queued bounds them.
    kafka = {"max_queued": 10_000_000, "relay_batch": batch, "paced": False}
    with procs(scratch) as running:
        bootstrap = start_broker(running)
        settings = Settings(
            database_url=url, transport="kafka", kafka_bootstrap=bootstrap, kafka=kafka
        )
        service = Service.from_settings(settings)
        try:
            relay = Relay(service)
            await relay.producer()  # the topics made, the producer connected: not timed
            seconds = await _timed(relay, pool)
        finally:
            await service.close()
    await _expect_queued(pool, deliveries, relay.published)
    return seconds


async def _timed(relay: Relay, pool: asyncpg.Pool) -> float:
    stop = asyncio.Event()
    started = time.perf_counter()
    task = asyncio.create_task(relay.run(stop))
    try:
        async with pool.acquire() as conn:
            while await conn.fetchval(_PENDING):
                if task.done():
                    task.result()
                    raise RuntimeError("the relay stopped before the backlog was published")
                await asyncio.sleep(0.01)
        return time.perf_counter() - started
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=60)


async def _expect_queued(pool: asyncpg.Pool, deliveries: int, published: int) -> None:
    async with pool.acquire() as conn:
        queued = await conn.fetchval("SELECT count(*) FROM delivery WHERE status = 'QUEUED'")
    if queued != deliveries or published < deliveries:
        raise RuntimeError(f"{deliveries} due: {queued} QUEUED, {published} published")


async def raw_run(pool: asyncpg.Pool, deliveries: int, batch: int) -> float:
    """The relay's claim and mark in plain SQL, one transaction per batch, no publish."""
    claimed = 0
    async with pool.acquire() as conn:
        started = time.perf_counter()
        while True:
            now = utcnow()
            async with conn.transaction():
                rows = await conn.fetch(DUE, PRIORITY, now, batch)
                if rows:
                    await conn.execute(MARK_QUEUED, [r["id"] for r in rows], now + QUEUE_LEASE, now)
            if not rows:
                break
            claimed += len(rows)
        seconds = time.perf_counter() - started
    await _expect_queued(pool, deliveries, claimed)
    return seconds
