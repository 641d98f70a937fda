"""A Redis of the test's own stopped and started again under the limiter (the other Redis
coordination tests, on the shared Redis: tests/integration/test_redis_coordination.py)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from tests.integration.test_redis_coordination import RATE, limiter, offer
from tests.processes import free_port
from tidings.priorities import Priority


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[tuple[int, list[subprocess.Popen[bytes]]]]:
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.fail("redis-server is not installed (scripts/services.sh installs it)")
    port = free_port()
    started: list[subprocess.Popen[bytes]] = []
    yield port, started
    for process in started:
        process.kill()
        process.wait()


def start_redis(port: int, started: list[subprocess.Popen[bytes]]) -> None:
    args = ["redis-server", "--port", str(port), "--save", "", "--appendonly", "no"]
    started.append(subprocess.Popen(args, stdout=subprocess.DEVNULL))
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError("redis-server did not start")


async def test_redis_down_then_back(own_redis: tuple[int, list[subprocess.Popen[bytes]]]) -> None:
    port, started = own_redis
    start_redis(port, started)
    client = aioredis.Redis.from_url(
        f"redis://127.0.0.1:{port}/0", socket_timeout=0.2, socket_connect_timeout=0.2
    )
    account = "acct"
    each = limiter(client, account)
    each.set_share(0.5)
    assert await offer([each], account, Priority.HIGH, 0.5) > 0 and each.health.up
    started[-1].kill()
    started[-1].wait()
    # Right after the switch there is no burst: the fallback starts empty.
    at_switch = await offer([each], account, Priority.HIGH, 0.3)
    assert at_switch <= 0.5 * RATE * 0.3 + 1, at_switch
    during = await offer([each], account, Priority.HIGH, 2.0)
    assert not each.health.up
    assert during <= 0.5 * RATE * 2 + 0.5 * RATE * 0.5 + 1, during  # the share, not more
    start_redis(port, started)
    await offer([each], account, Priority.HIGH, 1.5)  # tries again within a second
    assert each.health.up
    await client.aclose()
