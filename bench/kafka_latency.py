"""HIGH latency while LOW drains, Kafka transport against direct mode.

Per mode, from emptied tables and a reset simulator: ``tidings api``; ``low`` LOW marketing
emails accepted through ``POST /v1/notifications/batch``; then the senders start (direct:
one ``tidings dispatch``; kafka: one ``tidings relay`` and one ``tidings worker`` on a fresh
tansu broker) and send through one SendGrid account limited to ``rate``/s to the simulator
(``tidings simulate``, its SendGrid limited to the same rate). After ``warmup`` seconds of
drain, HIGH emails are POSTed one per request at ``high_rate``/s for ``high_seconds``; each
one's latency is from the 202 as the bench got it to the simulator's receipt (``at``).
"""

from __future__ import annotations

import asyncio
import math
import os
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from bench import campaign_data, kafka_trace
from bench.campaign_drain import _wait_sent
from bench.kafka_procs import SENDGRID_KEY, Procs, procs, start_api, start_broker, tidings_env
from bench.rate_scenario import percentile

ACCOUNT = "sendgrid-sim"
LOW_BATCH = 1_000


@dataclass(frozen=True)
class LatencyRun:
    low: int  # LOW emails accepted before the senders start
    rate: float  # the account's and the simulator's limit, per second
    high_rate: float  # HIGH POSTs per second
    high_seconds: float
    warmup: float  # seconds of LOW drain before the first HIGH
    wait: float  # how long, after the last HIGH 202, the run waits for HIGH to be sent


@dataclass
class ModeFigures:
    mode: str  # "direct" or "kafka"
    latencies: list[float]  # seconds, 202 -> simulator receipt, of those received
    offered: int  # HIGH accepted
    missing: dict[str, int]  # HIGH not received when the run stopped waiting, by status
    low_in_window: int  # LOW received between the first HIGH 202 and the last HIGH receipt
    window: float  # seconds of that window
    over_limit: int  # the simulator's 429s
    accept_seconds: float = 0.0  # accepting the LOW backlog
    low_queued_at_start: int = 0  # LOW rows QUEUED (in the topic) when HIGH started
    steps: list[tuple[str, float, int]] = field(default_factory=list)  # traced runs only
    early: tuple[int, int] = (0, 0)  # traced: tickets fetched before the relay's commit, lost

    def p(self, q: float) -> float:
        """The q-quantile over every HIGH accepted, one never received counting as later
        than any (infinite)."""
        unsent = [math.inf] * (self.offered - len(self.latencies))
        return percentile(self.latencies + unsent, q)

    @property
    def unsent(self) -> int:
        return sum(self.missing.values())

    @property
    def low_rate(self) -> float:
        return self.low_in_window / self.window if self.window else 0.0


def _env(
    mode: str, url: str, scratch: Path, sim_url: str, rate: float, running: Procs, trace: bool
) -> dict[str, str]:
    """The processes' settings; kafka: a fresh broker started in ``running``."""
    account = {
        "kind": "sendgrid",
        "api_key": SENDGRID_KEY,
        "base_url": sim_url,
        "from_email": "noreply@example.com",
        "rate_per_second": rate,
        "timeout": 5,
    }
    settings: dict[str, Any] = {
        "database_url": url,
        "secret_key": "bench-secret",
        "outbox_dir": scratch / "outbox",
        "accounts": {ACCOUNT: account},
        "providers": {"email": ACCOUNT},
    }
    if mode == "kafka":
        settings.update(transport="kafka", kafka_bootstrap=start_broker(running))
    env = tidings_env(**settings)
    return _traced(env, scratch) if trace else env


async def measure_mode(
    mode: str,
    url: str,
    pool: asyncpg.Pool,
    scratch: Path,
    sim_url: str,
    run: LatencyRun,
    trace: bool = False,
) -> ModeFigures:
    """One mode, from emptied tables and a reset simulator; ``trace``: the senders run
    under bench/kafka_trace.py, and the figures say where HIGH's time went."""
    async with pool.acquire() as conn:
        await campaign_data.reset(conn)
    async with httpx.AsyncClient(base_url=sim_url, timeout=60.0) as sim:
        (await sim.post("/_sim/reset")).raise_for_status()
        with procs(scratch) as running:
            env = _env(mode, url, scratch, sim_url, run.rate, running, trace)
            accept_seconds, queued, accepted = await _drive(mode, env, pool, sim, running, run)
            await _wait_sent(pool, [a.delivery_id for a in accepted.values()], timeout=run.wait)
            received = (await sim.get("/_sim/sendgrid/messages")).json()
            over_limit = (await sim.get("/_sim/counts")).json()["sendgrid"]["overLimit"]
            running.check()
            missing = await _statuses(pool, accepted, received)
    figures = _figures(mode, accepted, received, over_limit)
    figures.missing, figures.accept_seconds, figures.low_queued_at_start = (
        missing,
        accept_seconds,
        queued,
    )
    if trace:
        figures.steps = _steps(scratch, mode, accepted, received)
        ids = [a.delivery_id for a in accepted.values()]
        figures.early = kafka_trace.early_tickets(str(scratch / "trace"), ids)
    return figures


async def _drive(
    mode: str,
    env: dict[str, str],
    pool: asyncpg.Pool,
    sim: httpx.AsyncClient,
    running: Procs,
    run: LatencyRun,
) -> tuple[float, int, dict[str, Accepted]]:
    """API up, LOW accepted, senders started, warm-up, HIGH offered: the seconds LOW's
    acceptance took, the LOW rows QUEUED when HIGH started, and the HIGH accepted."""
    base_url = await start_api(running, env)
    limits = httpx.Limits(max_connections=16, max_keepalive_connections=16)
    async with httpx.AsyncClient(base_url=base_url, timeout=60.0, limits=limits) as api:
        accept_seconds = await accept_low(api, run.low)
        _start_senders(running, mode, env)
        await _warm_up(sim, running, run.warmup)
        queued = await _queued_low(pool)
        return accept_seconds, queued, await offer_high(api, running, run, mode)


async def accept_low(api: httpx.AsyncClient, count: int) -> float:
    """The LOW backlog, in batches, two in flight; seconds it took."""
    started = time.perf_counter()
    serials = iter(range(0, count, LOW_BATCH))

    async def poster() -> None:
        for first in serials:
            items = [
                {
                    "idempotencyKey": f"low-{n}",
                    "type": campaign_data.PROMO,
                    "to": {"email": f"low-{n}@example.com"},
                    "data": campaign_data.CAMPAIGN_DATA,
                }
                for n in range(first, min(first + LOW_BATCH, count))
            ]
            answer = await api.post("/v1/notifications/batch", json={"notifications": items})
            answer.raise_for_status()
            refused = [r for r in answer.json()["results"] if r["status"] != "accepted"]
            if refused:
                raise RuntimeError(f"LOW batch: {len(refused)} refused, e.g. {refused[0]}")

    await asyncio.gather(poster(), poster())
    return time.perf_counter() - started


def _start_senders(running: Procs, mode: str, env: dict[str, str]) -> None:
    commands = ["relay", "worker"] if mode == "kafka" else ["dispatch"]
    for command in commands:
        if kafka_trace.ENV in env:
            running.spawn(command, [sys.executable, "-m", "bench.kafka_trace", command], env)
        else:
            running.tidings(command, [command], env)


def _traced(env: dict[str, str], scratch: Path) -> dict[str, str]:
    root = str(Path(__file__).resolve().parents[1])  # bench.kafka_trace from any directory
    path = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env | {kafka_trace.ENV: str(scratch / "trace"), "PYTHONPATH": path}


def _steps(
    scratch: Path, mode: str, accepted: dict[str, Accepted], received: list[dict[str, Any]]
) -> list[tuple[str, float, int]]:
    first_at: dict[str, float] = {}
    for record in received:
        first_at.setdefault(record["address"], record["at"])
    at = {a.delivery_id: a.at for a in accepted.values()}
    got = {
        a.delivery_id: first_at[address] for address, a in accepted.items() if address in first_at
    }
    return kafka_trace.steps(str(scratch / "trace"), mode, at, got)


async def _warm_up(sim: httpx.AsyncClient, running: Procs, seconds: float) -> None:
    """Until the simulator received the first LOW, then ``seconds`` more."""
    deadline = time.monotonic() + 60
    while (await sim.get("/_sim/counts")).json()["sendgrid"]["received"] == 0:
        running.check()
        if time.monotonic() > deadline:
            raise TimeoutError("no LOW email reached the simulator within 60 s")
        await asyncio.sleep(0.1)
    await asyncio.sleep(seconds)
    running.check()


async def _queued_low(pool: asyncpg.Pool) -> int:
    async with pool.acquire() as conn:
        count: int = await conn.fetchval(
            "SELECT count(*) FROM delivery WHERE status = 'QUEUED' AND priority = 'low'"
        )
    return count


@dataclass(frozen=True)
class Accepted:
    delivery_id: uuid.UUID
    at: float  # time.time() when the 202 arrived


async def offer_high(
    api: httpx.AsyncClient, running: Procs, run: LatencyRun, mode: str
) -> dict[str, Accepted]:
    """HIGH POSTs at a steady pace, one request each; what was accepted, by address."""
    count = round(run.high_rate * run.high_seconds)
    accepted: dict[str, Accepted] = {}

    async def post(serial: int) -> None:
        address = f"high-{mode}-{serial}@example.com"
        body = {"type": campaign_data.OTP, "to": {"email": address}, "data": {"code": serial}}
        headers = {"Idempotency-Key": f"high-{mode}-{serial}"}
        answer = await api.post("/v1/notifications", json=body, headers=headers)
        at = time.time()
        if answer.status_code != 202:
            raise RuntimeError(f"HIGH POST: {answer.status_code} {answer.text[:300]}")
        accepted[address] = Accepted(uuid.UUID(answer.json()["deliveries"][0]["id"]), at)

    started = time.monotonic()
    tasks = []
    for serial in range(count):
        await asyncio.sleep(max(0.0, started + serial / run.high_rate - time.monotonic()))
        tasks.append(asyncio.create_task(post(serial)))
    await asyncio.gather(*tasks)
    running.check()
    return accepted


def _figures(
    mode: str, accepted: dict[str, Accepted], received: list[dict[str, Any]], over_limit: int
) -> ModeFigures:
    """Latencies by address (the first receipt of each), and the LOW received meanwhile."""
    first_at: dict[str, float] = {}
    for record in received:
        first_at.setdefault(record["address"], record["at"])
    arrived = [a for a in accepted if a in first_at]
    latencies = [first_at[a] - accepted[a].at for a in arrived]
    start = min(a.at for a in accepted.values())
    end = max((first_at[a] for a in arrived), default=start)
    low = sum(1 for r in received if r["address"].startswith("low-") and start <= r["at"] <= end)
    return ModeFigures(mode, latencies, len(accepted), {}, low, end - start, over_limit)


async def _statuses(
    pool: asyncpg.Pool, accepted: dict[str, Accepted], received: list[dict[str, Any]]
) -> dict[str, int]:
    """The delivery status of each HIGH the simulator never got, counted."""
    got = {r["address"] for r in received}
    ids = [a.delivery_id for address, a in accepted.items() if address not in got]
    async with pool.acquire() as conn:
        rows = await conn.fetch(
            "SELECT status, count(*) AS n FROM delivery WHERE id = ANY($1::uuid[]) GROUP BY status",
            ids,
        )
    return {row["status"]: row["n"] for row in rows}
