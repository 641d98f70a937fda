"""Two real ``tidings dispatch`` processes on one PostgreSQL and one SendGrid account limited
to 40/s, against the provider simulator limited to 40/s: with Redis they share one bucket,
without it each takes half; neither ever makes the simulator answer 429. A Redis of the
test's own stopped for 10 s mid-run: the limit still holds, nothing is lost."""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from tests.helpers import put_type, windows
from tests.processes import free_port, tidings_env, tidings_processes
from tidings.service import Service
from tidings.simulator.behaviour import Behaviour
from tidings.simulator.server import Simulator, SimulatorConfig
from tidings.store.schema import delivery

pytestmark = [pytest.mark.slow, pytest.mark.parametrize("backend", ["postgresql"], indirect=True)]

KEY = "SG.fleet-test"
# A database of the shared Redis for this file alone: the Kafka fleet test uses the same
# account name, and its rate and in-flight keys must not meet ours when both run at once.
REDIS_URL = "redis://127.0.0.1:6379/2"
LIMIT = 40
# The account's bucket (the default half second's worth: 20 tokens at 40/s). A token bucket
# lets any window of W seconds hold R * W + C: after a lull (a loaded machine falling
# behind) one second may hold R + C, which the provider's own bucket (a second's worth)
# accepts. On a quiet machine the dispatchers keep the bucket empty and no second holds more
# than R + 1; under CI's load that cannot be promised, so the bound tested is R + C.
BURST_SECONDS = 0.5
BUCKET = LIMIT * BURST_SECONDS
HIGH, LOW = 200, 1000


@pytest.fixture
async def sim(tmp_path: Path) -> AsyncIterator[Simulator]:
    behaviour = {"sendgrid": Behaviour(rate_limit=LIMIT, dedup=False)}
    config = SimulatorConfig(credentials_dir=tmp_path, sendgrid_api_key=KEY, behaviours=behaviour)
    async with Simulator(config) as simulator:
        yield simulator


def fleet_env(database_url: str, sim: Simulator, redis_url: str | None) -> dict[str, str]:
    account = {
        "kind": "sendgrid",
        "api_key": KEY,
        "base_url": sim.url,
        "from_email": "noreply@example.com",
        "rate_per_second": LIMIT,
        "timeout": 5,
    }
    settings: dict[str, Any] = {
        "database_url": database_url,
        "accounts": {"sendgrid-main": account},
        "providers": {"email": "sendgrid-main"},
        "reaper_interval": 1,
        "rate_limits": {"burst_seconds": BURST_SECONDS},
        "secret_key": "fleet-test",
    }
    if redis_url:
        settings["redis_url"] = redis_url
    return tidings_env(**settings)


async def accept(client: httpx.AsyncClient) -> None:
    """HIGH and LOW emails, all due now (HIGH to high-N@, LOW to low-N@)."""
    await put_type(client, "otp", priority="high", channels=("email",))
    await put_type(client, "promo", category="marketing", priority="low", channels=("email",))
    items = [("otp", f"high-{n}") for n in range(HIGH)] + [
        ("promo", f"low-{n}") for n in range(LOW)
    ]
    for start in range(0, len(items), 500):
        batch = [
            {
                "idempotencyKey": str(uuid.uuid4()),
                "type": kind,
                "to": {"email": f"{who}@example.com"},
            }
            for kind, who in items[start : start + 500]
        ]
        answer = await client.post("/v1/notifications/batch", json={"notifications": batch})
        assert answer.status_code == 200, answer.text


async def all_sent(service: Service, within: float) -> None:
    deadline = time.monotonic() + within
    query = sa.select(delivery.c.status, sa.func.count()).group_by(delivery.c.status)
    while True:
        async with service.db.engine.connect() as conn:
            counts = dict((await conn.execute(query)).all())
        if counts == {"SENT": HIGH + LOW}:
            return
        assert time.monotonic() < deadline, f"not all SENT: {counts}"
        await asyncio.sleep(0.25)


def check_the_simulator(sim: Simulator) -> None:
    state = sim.state("sendgrid")
    received = state.received
    assert state.counts["over_limit"] == 0, "the simulator answered 429"
    assert len({r.address for r in received}) == HIGH + LOW  # every one, each once
    assert len(received) == HIGH + LOW
    first = min(r.at for r in received)
    # No one-second window holds more than the limit and the account's bucket (R * 1 + C,
    # the bound of a token bucket, whose C the provider's own bucket exceeds), give or take
    # one request for the jitter between a grant and its arrival; the first second, when
    # the first connections are being opened, is left out.
    steady = [r.at for r in received if r.at >= first + 1.0]
    assert max(windows(steady)) <= LIMIT + BUCKET + 1, max(windows(steady))
    # LOW held to its 60 % share while HIGH also sends: 0.6 R a second, plus its own class
    # bucket (0.6 C), give or take one for the arrival jitter.
    high_until = max(r.at for r in received if r.address.startswith("high-"))
    low = [r.at for r in received if r.address.startswith("low-") and r.at <= high_until]
    if low:
        assert max(windows(low)) <= 0.6 * (LIMIT + BUCKET) + 1, max(windows(low))


async def test_two_dispatchers_share_one_limit_through_redis(
    client: httpx.AsyncClient,
    service: Service,
    sim: Simulator,
    pg_database_url: str,
    tmp_path: Path,
) -> None:
    await accept(client)
    env = fleet_env(pg_database_url, sim, REDIS_URL)
    await _flush_rate_state()
    with tidings_processes(env, tmp_path) as processes:
        processes.start_dispatcher("dispatch-a")
        processes.start_dispatcher("dispatch-b")
        await all_sent(service, within=90)
    check_the_simulator(sim)


async def test_without_redis_each_dispatcher_takes_half(
    client: httpx.AsyncClient,
    service: Service,
    sim: Simulator,
    pg_database_url: str,
    tmp_path: Path,
) -> None:
    await accept(client)
    env = fleet_env(pg_database_url, sim, None)
    with tidings_processes(env, tmp_path) as processes:
        first = processes.start_dispatcher("dispatch-a")
        # The second joins while the first sends: for up to a report interval the first
        # still takes the whole rate, which the simulator's own bucket must absorb.
        await asyncio.sleep(1.0)
        processes.start_dispatcher("dispatch-b")
        await all_sent(service, within=120)
        assert first.is_running()
    state = sim.state("sendgrid")
    assert state.counts["over_limit"] == 0, "the simulator answered 429"
    assert len({r.address for r in state.received}) == HIGH + LOW


async def test_redis_down_for_ten_seconds(
    client: httpx.AsyncClient,
    service: Service,
    sim: Simulator,
    pg_database_url: str,
    tmp_path: Path,
) -> None:
    binary = shutil.which("redis-server")
    assert binary, "redis-server is not installed (scripts/services.sh installs it)"
    port = free_port()
    redis = _start_redis(binary, port)
    try:
        await accept(client)
        env = fleet_env(pg_database_url, sim, f"redis://127.0.0.1:{port}/0")
        with tidings_processes(env, tmp_path) as processes:
            processes.start_dispatcher("dispatch-a")
            processes.start_dispatcher("dispatch-b")
            await asyncio.sleep(5)
            redis.kill()
            redis.wait()
            await asyncio.sleep(10)
            redis = _start_redis(binary, port)
            await all_sent(service, within=120)
            logs = "".join(p.log_path.read_text() for p in processes.started)
        assert "Redis is unreachable" in logs and "Redis is reachable again" in logs
        check_the_simulator(sim)
    finally:
        redis.kill()
        redis.wait()


def _start_redis(binary: str, port: int) -> subprocess.Popen[bytes]:
    args = [binary, "--port", str(port), "--save", "", "--appendonly", "no"]
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return process
        except OSError:
            time.sleep(0.05)
    raise AssertionError("redis-server did not start")


async def _flush_rate_state() -> None:
    """Start from a full bucket, whatever an earlier test left for this account."""
    import redis.asyncio as aioredis

    client = aioredis.Redis.from_url(REDIS_URL)
    try:
        await client.delete("tidings:rate:sendgrid-main")
    finally:
        await client.aclose()
