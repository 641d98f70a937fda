"""The measurements, each run ``repeat`` times alternating tidings and its baseline (and, for
the accept rows, the same baseline run by pgbench)."""

from __future__ import annotations

import math
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import asyncpg

from bench import accept, baseline, database, dispatch, pgbench, simulated
from bench.accept import chunks
from bench.config import BenchConfig
from bench.report import Measurement
from bench.workload import Item, items
from tidings.providers.chains import ProviderSet
from tidings.service import Service

Run = Callable[[Sequence[Item]], Awaitable[float]]
# pgbench runs its own count of transactions: (rows it inserted, rows per second).
Counted = Callable[[Sequence[Item]], Awaitable[tuple[int, float]]]
SIDES = ("tidings", "baseline", "pgbench")


@dataclass(frozen=True)
class Case:
    measurement: Measurement
    items: list[Item]
    warmup: int  # items in the unmeasured first run of each side
    prepare: Callable[[Sequence[Item]], Awaitable[None]]
    tidings: Run
    baseline: Run
    status: str  # every delivery's status after a run
    pgbench: Counted | None = None

    @property
    def sides(self) -> tuple[str, ...]:
        return SIDES if self.pgbench is not None else SIDES[:2]


@dataclass(frozen=True)
class Resources:
    config: BenchConfig
    pool: asyncpg.Pool  # the baseline's connections (and the bench's own queries)
    http: list[accept.Client]  # to the `tidings api` subprocess, one per concurrent client
    service: Service  # the in-process dispatcher's
    sim_service: Service  # the same at the simulator row's lane concurrency
    sim_providers: ProviderSet  # SendGrid, to the simulator subprocess
    sim_url: str


def _accept_single(r: Resources) -> Case:
    c = r.config
    clients, per_client = pgbench.plan(c.singles, c.concurrency)
    measurement = Measurement(
        name="Accept, single requests",
        workload=(
            f"{c.singles:,} notifications (one email delivery each), one per "
            f"`POST /v1/notifications`, from {c.concurrency} concurrent HTTP clients "
            "in the bench process (one aiohttp client with one keep-alive connection each) to a "
            "`tidings api` subprocess."
        ),
        baseline_how=(
            "per notification one transaction inserting its idempotency key (`ON CONFLICT "
            f"DO NOTHING`), the notification and its delivery, on {c.concurrency} "
            "concurrent asyncpg connections."
        ),
        unit="notifications/s",
        target=0.5,
        pgbench_how=(
            "the same three rows per notification in one statement (data-modifying CTEs; ids "
            "from `gen_random_uuid()`), one transaction each, `pgbench -M prepared "
            f"-c {clients} -j 2 -t {per_client}` ({clients * per_client:,} notifications: "
            "pgbench counts transactions per client)."
        ),
    )
    return Case(
        measurement,
        items(c.singles, "single"),
        warmup=min(c.singles, 200),
        prepare=lambda _items: database.reset(r.pool),
        tidings=lambda its: accept.post_singles(r.http[: c.concurrency], its),
        baseline=lambda its: baseline.insert_singles(r.pool, its, c.concurrency),
        status="PENDING",
        pgbench=lambda its: _pgbench(
            r, pgbench.single_script(), len(its), c.concurrency, 1, prepared=True
        ),
    )


def _accept_batch(r: Resources) -> Case:
    c = r.config
    measurement = Measurement(
        name="Accept, batches",
        workload=(
            f"{c.batched:,} notifications in batches of {c.batch_size:,} per "
            f"`POST /v1/notifications/batch`, {c.batch_concurrency} batches in flight, "
            "to the same `tidings api` subprocess."
        ),
        baseline_how=(
            f"per {c.batch_size:,} notifications one transaction with three multi-row inserts "
            "(`INSERT ... SELECT FROM unnest(...)`: keys `ON CONFLICT DO NOTHING`, "
            f"notifications, deliveries), on {c.batch_concurrency} concurrent asyncpg "
            "connections."
        ),
        unit="notifications/s",
        target=0.7,
        pgbench_how=(
            f"per {c.batch_size:,} notifications one statement inserting the three rows of "
            "each (data-modifying CTEs over a `VALUES` list of the batch's addresses and data, "
            "ids from `gen_random_uuid()`), one transaction each, `pgbench -M simple "
            f"-c {c.batch_concurrency}`, as many batches as the other sides (each client's "
            "count rounded up): the rows are sent and parsed as SQL text every time."
        ),
    )
    return Case(
        measurement,
        items(c.batched, "batch"),
        warmup=min(c.batched, 2 * c.batch_size),
        prepare=lambda _items: database.reset(r.pool),
        tidings=lambda its: accept.post_batches(r.http[: c.batch_concurrency], its, c.batch_size),
        baseline=lambda its: baseline.insert_batches(
            r.pool, its, c.batch_size, c.batch_concurrency
        ),
        status="PENDING",
        pgbench=lambda its: _pgbench(
            r,
            pgbench.batch_script(its[: c.batch_size]),
            math.ceil(len(its) / c.batch_size),
            c.batch_concurrency,
            min(c.batch_size, len(its)),
            prepared=False,
        ),
    )


async def _pgbench(
    r: Resources, script: str, total: int, clients: int, rows: int, *, prepared: bool
) -> tuple[int, float]:
    """``total`` transactions (rounded up per client) of ``script``, each of ``rows`` rows."""
    clients, per_client = pgbench.plan(total, clients)
    job = pgbench.Run(script, clients, per_client, prepared)
    tps = await pgbench.run(r.config.database_url, job)
    return job.transactions * rows, tps * rows


async def pending(pool: asyncpg.Pool, its: Sequence[Item]) -> None:
    """Empty tables, then ``its`` as due NORMAL email deliveries (the same plain SQL for both)."""
    await database.reset(pool)
    async with pool.acquire() as conn:
        for batch in chunks(its, 1_000):
            await baseline.insert_batch(conn, batch)
    await database.settle(pool)


def _dispatch(r: Resources) -> Case:
    c = r.config
    measurement = Measurement(
        name="Dispatch, no-op provider",
        workload=(
            f"{c.deliveries:,} due NORMAL email deliveries, pre-inserted; tidings' "
            "`Dispatcher` in the bench process, the no-op provider on every channel, the "
            f"NORMAL lane at claim_batch={c.claim_batch} and concurrency={c.lane_concurrency} "
            "(other settings at their defaults), timed from its start until no delivery is "
            "PENDING or SENDING."
        ),
        baseline_how=(
            "one claim loop (as the lane has): the same claim statement (`WITH due AS (SELECT "
            "... FOR UPDATE SKIP LOCKED LIMIT k) UPDATE ... FROM due, notification RETURNING "
            f"...`) with k={c.claim_batch}, then one `UPDATE ... SET status = 'SENT' WHERE "
            "id = ANY(...)` per claimed batch, until a claim returns nothing."
        ),
        unit="deliveries/s",
        target=0.7,
        pgbench_how=(
            f"{c.claim_batch} due rows claimed (`FOR UPDATE SKIP LOCKED`) and marked SENT in one "
            "`UPDATE` per transaction, one client, `pgbench -M prepared -c 1`, until all are "
            "SENT: one row version per delivery where the other sides write two (SENDING, then "
            "SENT), so the server's limit for this work from above."
        ),
    )
    return Case(
        measurement,
        items(c.deliveries, "dispatch"),
        warmup=min(c.deliveries, 2_000),
        prepare=lambda its: pending(r.pool, its),
        tidings=lambda _its: dispatch.run_dispatcher(r.service, r.pool),
        baseline=lambda _its: baseline.claim_and_send(r.pool, c.claim_batch, claimers=1),
        status="SENT",
        pgbench=lambda its: _pgbench_dispatch(r, len(its)),
    )


async def _pgbench_dispatch(r: Resources, deliveries: int) -> tuple[int, float]:
    """Claim-and-complete transactions until every delivery is SENT (``deliveries``/batch,
    rounded up: a last one finding fewer rows, or none, does no harm); deliveries/s."""
    batch = r.config.claim_batch
    job = pgbench.Run(pgbench.dispatch_script(batch), 1, math.ceil(deliveries / batch), True)
    tps = await pgbench.run(r.config.database_url, job)
    seconds = job.transactions / tps
    return deliveries, deliveries / seconds


async def _pending_at_simulator(r: Resources, its: Sequence[Item]) -> None:
    await pending(r.pool, its)
    await simulated.forget(r.sim_url)


def _hidden(in_flight: int, latency_ms: float) -> str:
    """The send rate ``in_flight`` sends at a time reach when each takes ``latency_ms``."""
    return "any" if latency_ms <= 0 else f"{in_flight / (latency_ms / 1000):,.0f}"


def _dispatch_sendgrid(r: Resources) -> Case:
    c = r.config
    n = c.sim_lane_concurrency
    measurement = Measurement(
        name=f"Dispatch, simulated SendGrid ({c.sim_latency_ms:g} ms)",
        workload=(
            f"{c.sim_deliveries:,} due NORMAL email deliveries, pre-inserted, sent by the same "
            "in-process `Dispatcher` through its SendGrid provider to the simulator's SendGrid (a "
            f"`tidings simulate` subprocess answering each request after {c.sim_latency_ms:g} "
            f"ms), the NORMAL lane at claim_batch={c.claim_batch} and concurrency={n} (enough "
            f"in flight to hide the latency up to {_hidden(n, c.sim_latency_ms)} sends/s), "
            f"the account's HTTP pool at {n} connections. Rate limits are not the bottleneck: "
            f"the account's rate is {simulated.ACCOUNT_RATE:,.0f}/s and the simulated SendGrid "
            "has none."
        ),
        baseline_how=(
            "tidings itself: the same dispatch with the no-op provider, the same lane "
            f"settings (concurrency={n}); the ratio is what {c.sim_latency_ms:g} ms per send "
            "and a real HTTP request each cost."
        ),
        unit="deliveries/s",
        target=0.9,
    )
    return _through_simulator_case(
        r, measurement, "dispatch-sendgrid", lambda: dispatch.run_dispatcher(r.sim_service, r.pool)
    )


def _through_simulator_case(
    r: Resources, measurement: Measurement, prefix: str, baseline: Callable[[], Awaitable[float]]
) -> Case:
    """tidings sending through the simulated SendGrid at its configured latency, against
    ``baseline``."""
    c = r.config
    return Case(
        measurement,
        items(c.sim_deliveries, prefix),
        warmup=min(c.sim_deliveries, 500),
        prepare=lambda its: _pending_at_simulator(r, its),
        tidings=lambda _its: _through_simulator(r, c.sim_latency_ms),
        baseline=lambda _its: baseline(),
        status="SENT",
    )


async def _through_simulator(r: Resources, latency_ms: float) -> float:
    await simulated.set_latency(r.sim_url, latency_ms)
    return await dispatch.run_dispatcher(r.sim_service, r.pool, r.sim_providers)


def _latency_hidden(r: Resources) -> Case:
    c = r.config
    n = c.sim_lane_concurrency
    measurement = Measurement(
        name=f"Dispatch, simulated SendGrid, {c.sim_latency_ms:g} ms against 0 ms",
        workload=(
            f"the row above's tidings side: {c.sim_deliveries:,} deliveries through the "
            f"simulator's SendGrid answering after {c.sim_latency_ms:g} ms, concurrency={n}."
        ),
        baseline_how=(
            "the same through the same simulator answering at once (0 ms): the same HTTP "
            "requests, the same CPU on both sides of them, no latency. The ratio is what "
            f"{c.sim_latency_ms:g} ms per request costs once {n} sends in flight hide it."
        ),
        unit="deliveries/s",
        target=0.9,
    )
    return _through_simulator_case(
        r, measurement, "dispatch-latency", lambda: _through_simulator(r, 0)
    )


def cases(resources: Resources) -> list[Case]:
    return [
        _accept_single(resources),
        _accept_batch(resources),
        _dispatch(resources),
        _dispatch_sendgrid(resources),
        _latency_hidden(resources),
    ]


async def _once(case: Case, side: str, its: Sequence[Item], pool: asyncpg.Pool) -> float:
    """One run of one side on freshly prepared tables; items per second."""
    await case.prepare(its)
    if side == "pgbench" and case.pgbench is not None:
        count, rate = await case.pgbench(its)
    else:
        seconds = await (case.tidings if side == "tidings" else case.baseline)(its)
        count, rate = len(its), len(its) / seconds
    await database.expect(pool, f"{case.measurement.name}, {side}", count, case.status)
    return rate


async def warm_up(all_cases: Sequence[Case], pool: asyncpg.Pool) -> None:
    """One small unmeasured run of each side: connections opened, code paths compiled."""
    for case in all_cases:
        for side in case.sides:
            await _once(case, side, case.items[: case.warmup], pool)
    _say("warmed up")


async def measure(all_cases: Sequence[Case], repeat: int, pool: asyncpg.Pool) -> None:
    """``repeat`` rounds; each round runs every case on both sides, alternating which goes
    first, and appends one sample per side."""
    for round_ in range(repeat):
        for case in all_cases:
            sides = case.sides if round_ % 2 == 0 else case.sides[::-1]
            for side in sides:
                rate = await _once(case, side, case.items, pool)
                getattr(case.measurement, side).append(rate)
                m = case.measurement
                _say(f"round {round_ + 1}/{repeat} {m.name:<36} {side:<8} {rate:>9,.0f} {m.unit}")


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
