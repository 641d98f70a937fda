"""The three measurements, each run ``repeat`` times alternating tidings and its baseline."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import asyncpg
import httpx

from bench import accept, baseline, database, dispatch
from bench.accept import chunks
from bench.config import BenchConfig
from bench.report import Measurement
from bench.workload import Item, items
from tidings.service import Service

Run = Callable[[Sequence[Item]], Awaitable[float]]


@dataclass(frozen=True)
class Case:
    measurement: Measurement
    items: list[Item]
    warmup: int  # items in the unmeasured first run of each side
    prepare: Callable[[Sequence[Item]], Awaitable[None]]
    tidings: Run
    baseline: Run
    status: str  # every delivery's status after a run


@dataclass(frozen=True)
class Resources:
    config: BenchConfig
    pool: asyncpg.Pool  # the baseline's connections (and the bench's own queries)
    http: list[httpx.AsyncClient]  # to the `tidings api` subprocess, one per concurrent client
    service: Service  # the in-process dispatcher's


def _accept_single(r: Resources) -> Case:
    c = r.config
    measurement = Measurement(
        name="Accept, single requests",
        workload=(
            f"{c.singles:,} notifications (one email delivery each), one per "
            f"`POST /v1/notifications`, from {c.concurrency} concurrent HTTP clients "
            "in the bench process (one httpx client with one keep-alive connection each) to a "
            "`tidings api` subprocess."
        ),
        baseline_how=(
            "per notification one transaction inserting the notification (`ON CONFLICT "
            f"DO NOTHING` on its idempotency key) and its delivery, on {c.concurrency} "
            "concurrent asyncpg connections."
        ),
        unit="notifications/s",
        target=None,
    )
    return Case(
        measurement,
        items(c.singles, "single"),
        warmup=min(c.singles, 200),
        prepare=lambda _items: database.reset(r.pool),
        tidings=lambda its: accept.post_singles(r.http[: c.concurrency], its),
        baseline=lambda its: baseline.insert_singles(r.pool, its, c.concurrency),
        status="PENDING",
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
            f"per {c.batch_size:,} notifications one transaction with two multi-row inserts "
            "(`INSERT ... SELECT FROM unnest(...)`, notifications `ON CONFLICT DO NOTHING`, "
            f"then deliveries), on {c.batch_concurrency} concurrent asyncpg connections."
        ),
        unit="notifications/s",
        target=0.5,
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
    )


async def _pending(r: Resources, its: Sequence[Item]) -> None:
    """Empty tables, then ``its`` as due NORMAL email deliveries (the same plain SQL for both)."""
    await database.reset(r.pool)
    async with r.pool.acquire() as conn:
        for batch in chunks(its, 1_000):
            await baseline.insert_batch(conn, batch)
    await database.settle(r.pool)


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
        target=0.5,
    )
    return Case(
        measurement,
        items(c.deliveries, "dispatch"),
        warmup=min(c.deliveries, 2_000),
        prepare=lambda its: _pending(r, its),
        tidings=lambda _its: dispatch.run_dispatcher(r.service, r.pool),
        baseline=lambda _its: baseline.claim_and_send(r.pool, c.claim_batch, claimers=1),
        status="SENT",
    )


def cases(resources: Resources) -> list[Case]:
    return [_accept_single(resources), _accept_batch(resources), _dispatch(resources)]


async def _once(case: Case, side: str, its: Sequence[Item], pool: asyncpg.Pool) -> float:
    """One run of one side on freshly prepared tables; items per second."""
    await case.prepare(its)
    seconds = await (case.tidings if side == "tidings" else case.baseline)(its)
    await database.expect(pool, f"{case.measurement.name}, {side}", len(its), case.status)
    return len(its) / seconds


async def warm_up(all_cases: Sequence[Case], pool: asyncpg.Pool) -> None:
    """One small unmeasured run of each side: connections opened, code paths compiled."""
    for case in all_cases:
        for side in ("tidings", "baseline"):
            await _once(case, side, case.items[: case.warmup], pool)
    _say("warmed up")


async def measure(all_cases: Sequence[Case], repeat: int, pool: asyncpg.Pool) -> None:
    """``repeat`` rounds; each round runs every case on both sides, alternating which goes
    first, and appends one sample per side."""
    for round_ in range(repeat):
        sides = ("tidings", "baseline") if round_ % 2 == 0 else ("baseline", "tidings")
        for case in all_cases:
            for side in sides:
                rate = await _once(case, side, case.items, pool)
                getattr(case.measurement, side).append(rate)
                m = case.measurement
                _say(f"round {round_ + 1}/{repeat} {m.name:<26} {side:<8} {rate:>9,.0f} {m.unit}")


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
