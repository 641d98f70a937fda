"""HIGH latency while a campaign drains: ``tidings serve`` (API + dispatcher in one process)
with every email through one no-op account limited to ``rate`` sends/s; HIGH notifications
are POSTed one per request at a steady pace, and each one's latency is from the API's 202
(as the client got it) to the delivery's ``sent_at`` in the database.

Run twice on the same process set-up: once alone, once while a LOW campaign of ``users``
deliveries (all due at once: ``campaigns.due_spread_seconds = 0``) is being sent.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from bench import campaign_data
from bench.api_server import _stop, _wait_ready, free_port
from bench.rate_scenario import percentile

ACCOUNT = "limited"


@dataclass(frozen=True)
class DrainRun:
    users: int  # the campaign's audience (one LOW email each)
    rate: float  # the account's rate_per_second
    high_rate: float  # HIGH notifications per second
    high_seconds: float
    low_concurrency: int | None = None  # the LOW lane's; None: tidings' default


@dataclass
class HighFigures:
    latencies: list[float]  # seconds, 202 -> sent_at
    window: float  # seconds from the first HIGH POST to the last 202
    low_sent_in_window: int = 0
    low_pending_after: int = 0
    expansion_seconds: float | None = None  # POST /v1/campaigns -> SENDING
    campaign_deliveries: int = 0
    unsent: int = 0  # HIGH accepted but not SENT when the run gave up waiting
    extra: dict[str, Any] = field(default_factory=dict)

    def p(self, q: float) -> float:
        return percentile(self.latencies, q)

    @property
    def low_rate(self) -> float:
        return self.low_sent_in_window / self.window if self.window else 0.0


def _config(path: Path, database_url: str, outbox: Path, run: DrainRun) -> Path:
    lane = (
        ""
        if run.low_concurrency is None
        else f"\n[lanes.low]\nconcurrency = {run.low_concurrency}\n"
    )
    path.write_text(
        f"""database_url = "{database_url}"
secret_key = "bench-secret"
outbox_dir = "{outbox}"

[accounts.{ACCOUNT}]
kind = "noop"
rate_per_second = {run.rate}

[providers]
email = ["{ACCOUNT}"]

[campaigns]
due_spread_seconds = 0
{lane}"""
    )
    return path


def _spawn(config: Path, port: int, log_path: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIDINGS_")}
    env.update(TIDINGS_CONFIG=str(config), TIDINGS_LOG_LEVEL="WARNING")
    with log_path.open("wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "tidings", "serve", "--host", "127.0.0.1", "--port", str(port)],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


async def measure(
    database_url: str, pool: asyncpg.Pool, scratch: Path, run: DrainRun, with_campaign: bool
) -> HighFigures:
    """One ``tidings serve`` from a reset database; HIGH offered, with or without a campaign."""
    async with pool.acquire() as conn:
        await campaign_data.reset(conn)
    config = _config(scratch / "tidings.toml", database_url, scratch / "outbox", run)
    port = free_port()
    log_path = scratch / f"serve-{'campaign' if with_campaign else 'alone'}.log"
    process = _spawn(config, port, log_path)
    base_url = f"http://127.0.0.1:{port}"
    try:
        await _wait_ready(base_url, process, log_path)
        limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
        async with httpx.AsyncClient(base_url=base_url, timeout=30.0, limits=limits) as client:
            campaign_id, expansion = None, None
            if with_campaign:
                campaign_id, expansion = await _start_campaign(client, pool, process)
            figures = await _offer_high(client, pool, run, "c" if with_campaign else "a")
        figures.expansion_seconds = expansion
        if campaign_id is not None:
            await _low_figures(pool, campaign_id, figures)
        if process.poll() is not None:
            raise RuntimeError(f"tidings serve exited during the run (see {log_path})")
        return figures
    finally:
        _stop(process)


async def _start_campaign(
    client: httpx.AsyncClient, pool: asyncpg.Pool, process: subprocess.Popen[bytes]
) -> tuple[uuid.UUID, float]:
    """POST the campaign; wait until its expansion is done (SENDING). Seconds it took."""
    body = {
        "type": campaign_data.PROMO,
        "audience": {"topic": campaign_data.DRAIN_TOPIC},
        "data": campaign_data.CAMPAIGN_DATA,
    }
    started = time.perf_counter()
    response = await client.post(
        "/v1/campaigns", json=body, headers={"Idempotency-Key": "bench-drain"}
    )
    assert response.status_code == 202, response.text
    campaign_id = uuid.UUID(response.json()["campaignId"])
    deadline = time.monotonic() + 600
    async with pool.acquire() as conn:
        while time.monotonic() < deadline:
            status = await conn.fetchval("SELECT status FROM campaign WHERE id = $1", campaign_id)
            if status in ("SENDING", "DONE"):
                return campaign_id, time.perf_counter() - started
            if process.poll() is not None:
                raise RuntimeError("tidings serve exited before the campaign was expanded")
            await asyncio.sleep(0.05)
    raise TimeoutError("the campaign was not expanded within 600 s")


async def _offer_high(
    client: httpx.AsyncClient, pool: asyncpg.Pool, run: DrainRun, prefix: str
) -> HighFigures:
    count = round(run.high_rate * run.high_seconds)
    accepted: dict[uuid.UUID, float] = {}

    async def post(serial: int) -> None:
        body = {
            "type": campaign_data.OTP,
            "to": {"email": f"high-{prefix}-{serial}@example.com"},
            "data": {"code": f"{serial:06d}"},
        }
        key = f"high-{prefix}-{serial}"
        response = await client.post(
            "/v1/notifications", json=body, headers={"Idempotency-Key": key}
        )
        at = time.time()
        assert response.status_code == 202, response.text
        accepted[uuid.UUID(response.json()["deliveries"][0]["id"])] = at

    started = time.monotonic()
    first = time.time()
    tasks = []
    for serial in range(count):
        await asyncio.sleep(max(0.0, started + serial / run.high_rate - time.monotonic()))
        tasks.append(asyncio.create_task(post(serial)))
    await asyncio.gather(*tasks)
    last = max(accepted.values())
    sent = await _wait_sent(pool, list(accepted))
    latencies = [sent[i].timestamp() - accepted[i] for i in accepted if i in sent]
    figures = HighFigures(latencies, last - first, unsent=len(accepted) - len(sent))
    figures.extra["window"] = (datetime.fromtimestamp(first).astimezone(), last)
    return figures


async def _wait_sent(
    pool: asyncpg.Pool, ids: list[uuid.UUID], timeout: float = 30.0
) -> dict[uuid.UUID, datetime]:
    """Each delivery's sent_at, once all are SENT (or what there is after ``timeout``)."""
    deadline = time.monotonic() + timeout
    async with pool.acquire() as conn:
        while True:
            rows = await conn.fetch(
                "SELECT id, sent_at FROM delivery WHERE id = ANY($1::uuid[]) AND status = 'SENT'",
                ids,
            )
            if len(rows) == len(ids) or time.monotonic() > deadline:
                return {row["id"]: row["sent_at"] for row in rows}
            await asyncio.sleep(0.1)


async def _low_figures(pool: asyncpg.Pool, campaign_id: uuid.UUID, figures: HighFigures) -> None:
    """How much of the campaign went out during the HIGH window, and what was left after."""
    start, last = figures.extra["window"]
    async with pool.acquire() as conn:
        figures.low_sent_in_window = await conn.fetchval(
            "SELECT count(*) FROM delivery WHERE campaign_id = $1 AND status = 'SENT' "
            "AND sent_at >= $2 AND sent_at <= to_timestamp($3)",
            campaign_id,
            start,
            last,
        )
        figures.low_pending_after = await conn.fetchval(
            "SELECT count(*) FROM delivery WHERE campaign_id = $1 AND status = 'PENDING'",
            campaign_id,
        )
        figures.campaign_deliveries = await conn.fetchval(
            "SELECT count(*) FROM delivery WHERE campaign_id = $1", campaign_id
        )
