"""``tidings api --workers N``: N real processes accepting on one port."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import httpx
import pytest

from tests.helpers import email_to, post
from tests.processes import TidingsProcess, free_port, tidings_env, tidings_processes, wait_ready
from tests.system.test_cli import run_cli

ACCEPTED = 'tidings_notifications_accepted_total{priority="normal",type="order.confirmed"}'


def _children(process: TidingsProcess) -> list[int]:
    """The pids the supervisor forked (Linux: its main thread's children)."""
    text = Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text()
    return [int(pid) for pid in text.split()]


async def _send_over_fresh_connections(base: str, count: int) -> list[httpx.Response]:
    """Each request on a connection of its own, so the kernel may hand it to any worker."""

    async def one() -> httpx.Response:
        async with httpx.AsyncClient(base_url=base, timeout=10.0) as client:
            return await post(client, email_to())

    return await asyncio.gather(*(one() for _ in range(count)))


async def _fresh_get(base: str, path: str) -> httpx.Response:
    async with httpx.AsyncClient(base_url=base, timeout=10.0) as client:
        return await client.get(path)


@pytest.mark.slow
async def test_two_workers_share_the_port_and_stop_together(tmp_path: Path) -> None:
    env = tidings_env()
    assert run_cli("migrate", cwd=tmp_path, env=env).returncode == 0
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with tidings_processes(env, tmp_path) as processes:
        api = processes.start("api", ["api", "--port", str(port), "--workers", "2"])
        await wait_ready(base, api)
        workers = _children(api)
        assert len(workers) == 2, api.log_tail()
        async with httpx.AsyncClient(base_url=base) as admin:
            kind = {"category": "transactional", "priority": "normal", "channels": ["email"]}
            assert (await admin.put("/v1/types/order.confirmed", json=kind)).status_code == 201
            url = "/v1/templates/order.confirmed/email/en"
            template = {"subject": "Hi", "text": "hello"}
            assert (await admin.put(url, json=template)).status_code == 201
        answers = await _send_over_fresh_connections(base, 40)
        assert [answer.status_code for answer in answers] == [202] * 40
        ids = {answer.json()["id"] for answer in answers}
        assert len(ids) == 40
        # One metrics directory for the run: any worker's /metrics counts every worker's.
        for _ in range(4):
            scraped = (await _fresh_get(base, "/metrics")).text
            assert f"{ACCEPTED} 40.0" in scraped
        # Whichever worker accepted it, any worker reads it back.
        async with httpx.AsyncClient(base_url=base) as reader:
            for notification_id in list(ids)[:5]:
                found = await reader.get(f"/v1/notifications/{notification_id}")
                assert found.status_code == 200, found.text
        assert await api.stop_and_wait(30) == 0, api.log_tail()
        assert not any(_is_running(pid) for pid in workers)


def _is_running(pid: int) -> bool:
    """Gone, or a zombie its parent has not reaped yet, counts as stopped."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.slow
async def test_a_worker_that_dies_stops_the_others(tmp_path: Path) -> None:
    env = tidings_env()
    assert run_cli("migrate", cwd=tmp_path, env=env).returncode == 0
    port = free_port()
    with tidings_processes(env, tmp_path) as processes:
        api = processes.start("api", ["api", "--port", str(port), "--workers", "2"])
        await wait_ready(f"http://127.0.0.1:{port}", api)
        first, _second = _children(api)
        os.kill(first, signal.SIGKILL)
        # Not half a service on the port: the supervisor exits, failing, for a restart.
        assert await api.wait_exit(30) != 0
        assert "exited" in api.log(), api.log_tail()
