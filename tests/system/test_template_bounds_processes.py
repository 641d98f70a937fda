"""The acceptance test of hostile templates: a real `tidings serve`, hostile deliveries and
previews, /healthz polled from a process of its own (the rest of the template bounds are in
tests/integration/test_template_bounds.py)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.helpers import eventually
from tests.integration.test_template_bounds import (
    _all_settled,
    _send_everything,
    _upload_hostile_types,
)
from tests.processes import free_port, tidings_env, tidings_processes, wait_ready
from tidings.content.render import RENDER_SECONDS


@pytest.mark.slow
async def test_hostile_templates_neither_block_the_service_nor_other_deliveries(
    tmp_path: Path,
) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    # Short leases: a render that blocked or escaped its lane would show as more attempts.
    env = tidings_env(lease_seconds=2, reaper_interval=0.5)
    with tidings_processes(env, tmp_path) as processes:
        server = processes.start("serve", ["serve", "--port", str(port)])
        await wait_ready(base, server)
        async with httpx.AsyncClient(base_url=base, timeout=30) as client:
            kinds = await _upload_hostile_types(client)
            with _health_poller(base, tmp_path) as gaps:
                await asyncio.sleep(0.5)  # the poller's start
                started = time.monotonic()
                hostile, normal, previews = await _send_everything(client, kinds)
                settled = await eventually(
                    lambda: _all_settled(client, [*hostile, normal]), within=60, interval=0.1
                )
                elapsed = time.monotonic() - started
        assert server.stop() == 0, server.log_tail()
    for preview in previews:
        assert preview.status_code == 200, preview.text
        assert preview.json()["channels"]["sms"]["error"], preview.text
    assert settled[normal]["status"] == "SENT"
    for notification_id in hostile:
        delivery = settled[notification_id]
        assert (delivery["status"], delivery["failureKind"]) == ("FAILED", "poison"), delivery
        assert delivery["attempts"] == 1, delivery  # at once, not after lease expiries
    assert elapsed < 30
    assert len(gaps) > 20, gaps
    # No template blocks the event loop that answers /healthz: a render on the loop would
    # hold it for its whole time limit (RENDER_SECONDS), so no gap comes near that; the
    # issue's 100 ms bound holds for 19 in 20 of them (a busy two-core machine can delay
    # one poll without any render being involved).
    ordered = sorted(gaps)
    assert ordered[-1] < RENDER_SECONDS / 2, ordered[-5:]
    assert ordered[int(len(ordered) * 0.95)] < 0.1, ordered[-5:]


# Polls in a process of its own, so that the test's own event loop (busy sending and
# reading) adds nothing to the latencies measured; prints each one, until the stop file is.
_POLLER = """
import pathlib, sys, time, httpx
stop = pathlib.Path(sys.argv[2])
with httpx.Client(base_url=sys.argv[1], timeout=30) as client:
    while not stop.exists():
        started = time.monotonic()
        assert client.get("/healthz").status_code == 200
        print(time.monotonic() - started, flush=True)
        time.sleep(0.01)
"""


@contextmanager
def _health_poller(base: str, workdir: Path) -> Iterator[list[float]]:
    """The latencies of ``GET /healthz`` asked one after another while in the block."""
    gaps: list[float] = []
    stop = workdir / "stop-polling"
    command = [sys.executable, "-c", _POLLER, base, str(stop)]
    poller = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        yield gaps
    finally:
        stop.touch()
        output, _ = poller.communicate(timeout=30)
    assert poller.returncode == 0
    gaps.extend(float(line) for line in output.split())
