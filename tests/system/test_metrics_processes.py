"""Metrics across processes: one `tidings api` shows what a `tidings dispatch` sent (the rest of
the metrics tests are in tests/integration/test_metrics.py)."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.helpers import put_type
from tests.integration.test_metrics import accept, email, scrape, unique, value, wait_settled
from tests.processes import free_port, tidings_env, tidings_processes, wait_ready


async def test_one_api_process_shows_what_a_dispatcher_process_sent(
    pg_database_url: str, tmp_path: Path
) -> None:
    port = free_port()
    directory = tmp_path / "metrics"
    env = tidings_env(
        database_url=pg_database_url,
        metrics_dir=directory,
        outbox_dir=tmp_path / "outbox",
        secret_key="test-secret",
        metrics_refresh_seconds=0,
    )
    kind = unique("metrics.fleet.")
    base = f"http://127.0.0.1:{port}"
    with tidings_processes(env, tmp_path / "run") as processes:
        api = processes.start_api(port)
        dispatcher = processes.start_dispatcher()
        await wait_ready(base, api)
        async with httpx.AsyncClient(base_url=base, timeout=5) as client:
            await put_type(client, kind, channels=("email",))
            ids = [await accept(client, email(kind, f"f{n}@example.com")) for n in range(5)]
            await wait_settled(client, ids, within=20)
            samples = await scrape(client)
            labels = {"type": kind, "channel": "email"}
            assert value(samples, "tidings_deliveries_accepted_total", **labels) == 5
            assert value(samples, "tidings_deliveries_sent_total", provider="sink", **labels) == 5
            pids = {f"-{api.pid}.db", f"-{dispatcher.pid}.db"}
            written = {path.name for path in directory.iterdir()}
            assert all(any(name.endswith(pid) for name in written) for pid in pids), written
            # A dispatcher that is gone still counts: its files stay.
            assert await dispatcher.stop_and_wait() == 0
            samples = await scrape(client)
            assert value(samples, "tidings_deliveries_sent_total", provider="sink", **labels) == 5
