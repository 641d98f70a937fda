"""Dropping a day's partition under load stalls nobody (docs/architecture.md, Retention and
partitions): an API process and a dispatcher process on one PostgreSQL database put on day
partitions (as `tidings migrate` leaves a new one), a client posting without pause, and
`tidings retention` detaching and dropping an old day holding thousands of finished rows
meanwhile. Neither the API's answers nor the dispatcher's sends pause for a second, and
neither process logs a failure."""

from __future__ import annotations

import asyncio
import itertools
import json
import sys
import time
import uuid
from datetime import timedelta
from pathlib import Path

import httpx
import sqlalchemy as sa

from tests.helpers import email_to, eventually, put_type
from tests.integration.test_partitions import add_events, draft
from tests.processes import (
    TidingsProcess,
    free_port,
    tidings_env,
    tidings_processes,
    wait_ready,
)
from tidings.clock import utcnow
from tidings.store.engine import Database, connect
from tidings.store.intake import accept
from tidings.store.partitions import ensure_partitions, partition_name
from tidings.store.schema import delivery

OLD_ROWS = 5_000
CLIENTS = 4
LOAD_BEFORE = 1.5  # seconds of load before the drop starts, and again after it ends
MAX_LATENCY = 1.0
MAX_SEND_GAP = 1.0  # the normal lane polls every 0.5 s: its usual gap is about that


async def _fill_old_day(db: Database, days_ago: int) -> str:
    """``OLD_ROWS`` finished notifications (with a delivery and an event each) on a day past
    retention; returns the name of that day's notification partition."""
    old = utcnow() - timedelta(days=days_ago)
    await ensure_partitions(db, old.date(), 0)
    for start in range(0, OLD_ROWS, 1_000):
        await accept(db, [draft(old, f"old-{n}") for n in range(start, start + 1_000)], old)
    await add_events(db, old)
    return partition_name("notification", old.date())


class Load:
    """Clients posting one notification per request, each request timed."""

    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.errors: list[str] = []
        self.accepted: list[uuid.UUID] = []
        self.stop = asyncio.Event()

    async def client(self, http: httpx.AsyncClient) -> None:
        while not self.stop.is_set():
            headers = {"Idempotency-Key": uuid.uuid4().hex}
            began = time.monotonic()
            try:
                response = await http.post("/v1/notifications", json=email_to(), headers=headers)
            except httpx.HTTPError as error:
                self.errors.append(repr(error))
                continue
            self.latencies.append(time.monotonic() - began)
            if response.status_code != 202:
                self.errors.append(f"{response.status_code} {response.text[:200]}")
            else:
                self.accepted.append(uuid.UUID(response.json()["id"]))


async def _retention(env: dict[str, str], workdir: Path) -> str:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tidings",
        "retention",
        env=env,
        cwd=workdir,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await process.communicate()
    assert process.returncode == 0, output.decode()
    return output.decode()


def _send_times(recording: Path) -> list[float]:
    """When the recording provider took each send (wall clock, its third field)."""
    return sorted(float(line.split()[2]) for line in recording.read_text().splitlines())


def longest_gap(times: list[float], start: float, end: float) -> float:
    """The longest time from ``start`` to ``end`` without a send: sends were due all along,
    so a dispatcher held up by the drop shows as a gap, at either end of it too."""
    inside = [start, *(t for t in times if start <= t <= end), end]
    return max(later - earlier for earlier, later in itertools.pairwise(inside))


def failures(process: TidingsProcess, lowest: str) -> list[str]:
    """The lines of ``process``'s log (JSON lines, docs/operations.md, Logs) at ``lowest``
    or above, with a traceback, or that are not a log record at all (Python's own output
    on a crash)."""
    levels = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
    found = []
    for line in process.log().splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            found.append(line)
            continue
        if levels.index(entry["level"]) >= levels.index(lowest) or "exc" in entry:
            found.append(line)
    return found


async def _all_sent(db: Database, ids: list[uuid.UUID]) -> bool:
    query = sa.select(sa.func.count()).where(
        delivery.c.notification_id.in_(ids), delivery.c.status == "SENT"
    )
    async with db.engine.connect() as conn:
        return (await conn.execute(query)).scalar_one() == len(ids)


async def test_dropping_a_day_under_load_stalls_nothing(
    pg_database_url: str, tmp_path: Path
) -> None:
    db = connect(pg_database_url)
    try:
        old_partition = await _fill_old_day(db, days_ago=40)
        recording = tmp_path / "sent.log"
        env = tidings_env(
            database_url=pg_database_url,
            providers={"email": f"record:{recording}", "sms": "noop", "push": "noop"},
            outbox_dir=tmp_path / "outbox",
        )
        port = free_port()
        base_url = f"http://127.0.0.1:{port}"
        with tidings_processes(env, tmp_path / "processes") as processes:
            api = processes.start_api(port)
            dispatcher = processes.start_dispatcher()
            await wait_ready(base_url, api)
            load = Load()
            clients = [httpx.AsyncClient(base_url=base_url, timeout=10) for _ in range(CLIENTS)]
            try:
                await put_type(clients[0], channels=("email",))
                posting = [asyncio.create_task(load.client(http)) for http in clients]
                await asyncio.sleep(LOAD_BEFORE)
                began = time.time()  # the recording's clock
                output = await _retention(env, tmp_path)
                ended = time.time()
                await asyncio.sleep(LOAD_BEFORE)
                load.stop.set()
                await asyncio.gather(*posting)
            finally:
                for http in clients:
                    await http.aclose()
            assert f"days dropped: {(utcnow() - timedelta(days=40)).date()}" in output, output
            assert load.errors == []
            assert len(load.accepted) > 100
            await eventually(lambda: _all_sent(db, load.accepted), within=30)
            slowest = max(load.latencies)
            gap = longest_gap(_send_times(recording), began, ended)
            print(
                f"\n{len(load.latencies)} requests, slowest {slowest * 1000:.0f} ms; "
                f"longest pause in sending {gap * 1000:.0f} ms; "
                f"drop took {(ended - began) * 1000:.0f} ms"
            )
            assert slowest < MAX_LATENCY, f"a request took {slowest:.2f} s"
            assert gap < MAX_SEND_GAP, f"the dispatcher sent nothing for {gap:.2f} s"
            assert api.is_running() and dispatcher.is_running()
            # The dispatcher reports a failed claim, outcome write or reaper pass as a
            # warning; the API warns once that it runs without keys, on loopback.
            assert failures(dispatcher, "WARNING") == []
            assert failures(api, "ERROR") == []
        async with db.asyncpg() as conn:
            assert await conn.fetchval("SELECT to_regclass($1)", old_partition) is None
    finally:
        await db.dispose()
