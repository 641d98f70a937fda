"""A real ``tidings serve`` on PostgreSQL survives deliveries it cannot process.

Bad data is written straight into the tables (as an older release or a hand edit could have
left it, past the API's bounds): a ttl that overflows a datetime, a template that recurses
without end, a user whose time zone does not exist. Before, the first of these raised out of
the lane and ended the process, API included, and each restart died again once the lease
expired. Now each bad delivery ends FAILED (or, for the ttl, is sent: it never expires), the
good ones are sent, and the process keeps serving.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from tests.helpers import post, put_type
from tests.processes import free_port, tidings_env, tidings_processes, wait_ready
from tidings.providers.testing import read_recording

RECURSIVE = "{% macro r() %}{{ r() }}{% endmacro %}{{ r() }}"
LEASE_SECONDS = 2
SETTLE_TIMEOUT = 30.0


async def _post(client: httpx.AsyncClient, type_name: str, **extra: Any) -> None:
    body = {"type": type_name, "to": {"email": f"{type_name}@example.com"}, **extra}
    response = await post(client, body)
    assert response.status_code == 202, response.text


async def _corrupt(db: asyncpg.Connection) -> None:
    """What the API refuses, written directly: PostgreSQL's integer ttl overflows only from a
    delivery created near the year 9999."""
    await db.execute(
        "UPDATE notification_type SET ttl_seconds = $1 WHERE name = 'forever'", 2**31 - 1
    )
    await db.execute(
        "UPDATE delivery SET created_at = $1 WHERE address = 'forever@example.com'",
        datetime(9999, 12, 1, tzinfo=UTC),
    )
    await db.execute("UPDATE template SET text = $1 WHERE type = 'recursive'", RECURSIVE)
    await db.execute("UPDATE user_profile SET timezone = 'Nowhere/Atlantis' WHERE id = 'fan'")


async def _statuses(db: asyncpg.Connection) -> dict[str, tuple[str, str | None]]:
    rows = await db.fetch("SELECT address, status, failure_kind FROM delivery")
    return {r["address"].split("@")[0]: (r["status"], r["failure_kind"]) for r in rows}


async def _settled(db: asyncpg.Connection, process: Any) -> dict[str, tuple[str, str | None]]:
    deadline = time.monotonic() + SETTLE_TIMEOUT
    while True:
        assert process.is_running(), f"serve died:\n{process.log_tail()}"
        rows = await _statuses(db)
        if all(status in ("SENT", "FAILED") for status, _ in rows.values()):
            return rows
        assert time.monotonic() < deadline, f"not settled: {rows}\n{process.log_tail()}"
        await asyncio.sleep(0.1)


async def test_serve_survives_deliveries_it_cannot_process(
    pg_database_url: str, tmp_path: Path
) -> None:
    recording = tmp_path / "calls.log"
    spec = f"record:{recording}"
    env = tidings_env(
        database_url=pg_database_url,
        providers={"email": spec, "sms": spec, "push": spec},
        lease_seconds=LEASE_SECONDS,
        reaper_interval=0.5,
        outbox_dir=tmp_path / "outbox",
    )
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    db = await asyncpg.connect(pg_database_url)
    try:
        with tidings_processes(env, tmp_path / "processes") as processes:
            # The API alone first: the bad rows must be in place before anything is claimed.
            api = processes.start_api(port)
            await wait_ready(base_url, api)
            async with httpx.AsyncClient(base_url=base_url, timeout=30) as client:
                for name in ("normal", "forever", "recursive"):
                    await put_type(client, name, channels=("email",))
                await put_type(client, "promo", category="marketing", channels=("email",))
                response = await client.put("/v1/users/fan/preferences", json={"timezone": "UTC"})
                assert response.status_code == 200, response.text
                for name in ("forever", "recursive", "normal"):
                    await _post(client, name)
                await _post(client, "promo", userId="fan")
            await api.stop_and_wait()
            await _corrupt(db)

            serve = processes.start("serve", ["serve", "--host", "127.0.0.1", "--port", str(port)])
            await wait_ready(base_url, serve)
            rows = await _settled(db, serve)
            # Past a lease expiry and several reaper runs: nothing comes back, nothing dies.
            await asyncio.sleep(LEASE_SECONDS + 1.5)
            async with httpx.AsyncClient(base_url=base_url, timeout=30) as client:
                await _post(client, "normal", to={"email": "later@example.com"})
                rows_later = await _settled(db, serve)
                assert (await client.get("/readyz")).status_code == 200
            assert serve.is_running(), serve.log_tail()
            log = serve.log()
    finally:
        await db.close()
    assert rows["normal"] == ("SENT", None)
    assert rows["forever"] == ("SENT", None)  # a ttl beyond any date never expires
    assert rows["recursive"] == ("FAILED", "poison")
    assert rows["promo"] == ("FAILED", "poison")
    assert rows_later["later"] == ("SENT", None)
    assert rows_later == rows | {"later": ("SENT", None)}
    sent = sorted(line.split()[0] for line in read_recording(recording))
    assert len(sent) == 3  # normal, forever, later: each once
    assert "cannot be processed" in log
    assert "@example.com" not in log  # the guard logs delivery ids, never addresses
