"""Direct-mode dispatch throughput with 1, 2 and 4 ``tidings dispatch`` processes.

Per run, from emptied tables: the processes start (PostgreSQL, no Redis: no rate limit to
share; every channel through the built-in ``noop`` chain; the NORMAL lane at ``claim_batch``
and ``concurrency``) and report themselves; then one transaction inserts ``deliveries`` due
NORMAL email deliveries (plain SQL) and wakes the NORMAL lanes (``pg_notify``, as the intake
does). Timed from that commit until no delivery is PENDING or SENDING.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg

from bench import baseline, database
from bench.dispatch import _UNFINISHED
from bench.kafka_procs import Procs, procs, tidings_env
from bench.workload import items, rows
from tidings.clock import utcnow
from tidings.priorities import Priority
from tidings.store.wakeup import notify_postgres

PROCESSES = (1, 2, 4)
SETTLE_SECONDS = 2.0  # after every process reported: its share taken, LISTEN connected


@dataclass
class ScalingFigures:
    deliveries: int
    claim_batch: int
    concurrency: int
    seconds: dict[int, list[float]] = field(default_factory=dict)  # processes -> runs

    def rate(self, processes: int) -> float:
        return self.deliveries / statistics.median(self.seconds[processes])

    def scaling(self, processes: int) -> float:
        return self.rate(processes) / self.rate(1)


async def measure(
    url: str, pool: asyncpg.Pool, scratch: Path, figures: ScalingFigures, repeat: int
) -> ScalingFigures:
    """``repeat`` rounds, each of 1, 2 and 4 processes in turn."""
    for attempt in range(repeat):
        for count in PROCESSES:
            seconds = await scaling_run(url, pool, scratch, count, figures)
            figures.seconds.setdefault(count, []).append(seconds)
            print(
                f"dispatch {attempt + 1}/{repeat}, {count} process(es): "
                f"{figures.deliveries / seconds:,.0f} deliveries/s",
                flush=True,
            )
    return figures


async def scaling_run(
    url: str, pool: asyncpg.Pool, scratch: Path, count: int, figures: ScalingFigures
) -> float:
    await database.reset(pool)
    lane = {"claim_batch": figures.claim_batch, "concurrency": figures.concurrency}
    noop = {channel: "noop" for channel in ("email", "sms", "push", "webhook")}
    env = tidings_env(
        database_url=url, secret_key="bench-secret", providers=noop, lanes={"normal": lane}
    )
    with procs(scratch) as running:
        for n in range(count):
            running.tidings(f"dispatch-{count}-{n}", ["dispatch"], env)
        await _until_reported(pool, running, count)
        await asyncio.sleep(SETTLE_SECONDS)
        started = await _insert_due(pool, figures.deliveries)
        async with pool.acquire() as conn:
            while await conn.fetchval(_UNFINISHED):
                running.check()
                await asyncio.sleep(0.01)
        seconds = time.perf_counter() - started
    await database.expect(pool, f"{count} dispatchers", figures.deliveries, "SENT")
    return seconds


async def _until_reported(pool: asyncpg.Pool, running: Procs, count: int) -> None:
    """Until ``count`` dispatchers have written their provider report (they do at start)."""
    deadline = time.monotonic() + 60
    async with pool.acquire() as conn:
        while await conn.fetchval("SELECT count(DISTINCT dispatcher) FROM provider_state") < count:
            running.check()
            if time.monotonic() > deadline:
                raise TimeoutError(f"{count} dispatchers did not report within 60 s")
            await asyncio.sleep(0.05)


async def _insert_due(pool: asyncpg.Pool, count: int) -> float:
    """One transaction: the notifications and their deliveries, and the NORMAL wake-up;
    ``time.perf_counter()`` once it committed."""
    now = utcnow()
    pairs = [rows(item, now) for item in items(count, "scale")]
    async with pool.acquire() as conn:
        async with conn.transaction():
            await conn.execute(baseline.INSERT_NOTIFICATIONS, *_columns([n for n, _ in pairs]))
            await conn.execute(baseline.INSERT_DELIVERIES, *_columns([d for _, d in pairs]))
            await notify_postgres(conn, Priority.NORMAL)
        return time.perf_counter()


def _columns(table: Sequence[tuple[object, ...]]) -> list[tuple[object, ...]]:
    return list(zip(*table, strict=True))
