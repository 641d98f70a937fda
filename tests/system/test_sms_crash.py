"""At most once across crashes, with real processes (docs/architecture.md, Claims, leases,
fences and the reaper): 2,000 SMS through the simulator's Twilio (no idempotency key, so
``on_ambiguous = fail`` by default) while ``tidings serve`` is SIGKILLed ten times in the
middle of its sends and started again.

The simulator counts the sends of each delivery (by the delivery id in the status callback
URL). Every delivery must end terminal and none may reach the phone twice: a send in flight
at a kill ends FAILED ambiguous (in the dead-letter queue) instead of being sent again.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections import Counter
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from tests.helpers import put_templates
from tests.processes import TidingsProcesses, free_port, tidings_env, tidings_processes, wait_ready
from tidings.simulator.behaviour import Behaviour
from tidings.simulator.server import Simulator, SimulatorConfig

SMS = 2000
KILLS = 10
TYPE = "crash.code"
ACCOUNT = "twilio-sim"
# Each send takes 20 to 80 ms at the simulated Twilio: a kill finds sends in flight.
LATENCY = Behaviour(latency_ms=20, latency_jitter_ms=60, report_delay_ms=20)
KILL_DELAY = (0.05, 0.5)  # seconds after a restarted process's first send
SETTLE_TIMEOUT = 90.0
UNFINISHED = ["PENDING", "QUEUED", "SENDING"]


def _serve(processes: TidingsProcesses, port: int) -> Any:
    return processes.start("serve", ["serve", "--host", "127.0.0.1", "--port", str(port)])


async def _until(check: Any, within: float, what: str) -> None:
    deadline = time.monotonic() + within
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {within}s")
        await asyncio.sleep(0.02)


async def _accept(client: httpx.AsyncClient) -> list[str]:
    ids: list[str] = []
    for start in range(0, SMS, 500):
        items = [
            {"idempotencyKey": f"sms-{n}", "type": TYPE, "to": {"phone": f"+1555{n:07d}"}}
            for n in range(start, start + 500)
        ]
        answer = await client.post("/v1/notifications/batch", json={"notifications": items})
        assert answer.status_code == 200, answer.text
        ids += [str(r["deliveries"][0]["id"]) for r in answer.json()["results"]]
    return ids


@pytest.mark.slow
@pytest.mark.timeout(600)
async def test_sms_are_sent_at_most_once_through_ten_sigkills(
    pg_database_url: str, tmp_path: Path
) -> None:
    seed = int(os.environ.get("CRASH_TEST_SEED", random.randrange(2**32)))
    print(f"\nSMS crash test seed {seed} (set CRASH_TEST_SEED to replay the same choices)")
    rng = random.Random(seed)
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    config = SimulatorConfig(credentials_dir=tmp_path / "sim", behaviours={"twilio": LATENCY})
    async with Simulator(config) as sim:
        account = {
            "kind": "twilio",
            "account_sid": config.twilio_account_sid,
            "auth_token": config.twilio_auth_token,
            "from_number": "+15005550006",
            "base_url": sim.url,
            "timeout": 5,
        }
        env = tidings_env(
            database_url=pg_database_url,
            accounts={ACCOUNT: account},
            providers={"sms": [ACCOUNT]},
            public_url=base_url,
            lease_seconds=2,
            reaper_interval=0.5,
            outbox_dir=tmp_path / "outbox",
        )
        received = sim.state("twilio").received
        db = await asyncpg.connect(pg_database_url)
        try:
            with tidings_processes(env, tmp_path / "processes") as processes:
                serving = _serve(processes, port)
                await wait_ready(base_url, serving)
                async with httpx.AsyncClient(base_url=base_url, timeout=30) as client:
                    body = {"category": "transactional", "priority": "high", "channels": ["sms"]}
                    assert (await client.put(f"/v1/types/{TYPE}", json=body)).status_code == 201
                    await put_templates(client, TYPE, ("sms",))
                    ids = await _accept(client)
                for kill in range(KILLS):
                    sent_before = len(received)

                    async def sending(before: int = sent_before, process: Any = serving) -> bool:
                        assert process.is_running(), process.log_tail()
                        return len(received) > before

                    await _until(sending, 30, f"sends before kill {kill + 1}")
                    await asyncio.sleep(rng.uniform(*KILL_DELAY))
                    assert await serving.kill_and_wait() == -9
                    serving = _serve(processes, port)
                    await wait_ready(base_url, serving)

                async def settled() -> bool:
                    assert serving.is_running(), serving.log_tail()
                    left = await db.fetchval(
                        "SELECT count(*) FROM delivery WHERE status = ANY($1::text[])", UNFINISHED
                    )
                    return left == 0

                await _until(settled, SETTLE_TIMEOUT, "every SMS terminal")
                async with httpx.AsyncClient(base_url=base_url, timeout=30) as client:
                    params = {"kind": "ambiguous", "limit": 1000}
                    dead = (await client.get("/v1/dead-letters", params=params)).json()
                assert await serving.stop_and_wait(20) == 0, serving.log_tail()
            rows = await db.fetch("SELECT id, status, failure_kind FROM delivery")
        finally:
            await db.close()
        sends = Counter(r.idempotency_key for r in received)

    ends = {str(r["id"]): (r["status"], r["failure_kind"]) for r in rows}
    assert sorted(ends) == sorted(ids)
    twice = {key: n for key, n in sends.items() if n > 1}
    ambiguous = {i for i, end in ends.items() if end == ("FAILED", "ambiguous")}
    sent = {i for i, (status, _) in ends.items() if status in ("SENT", "DELIVERED")}
    print(
        f"  {KILLS} kills: {len(sent)} sent, {len(ambiguous)} FAILED ambiguous "
        f"({sum(1 for i in ambiguous if sends[i])} of them did reach the simulator), "
        f"{len(received)} sends for {len(sends)} deliveries, {len(twice)} sent twice"
    )
    assert not twice, f"{len(twice)} SMS sent more than once: {list(twice.items())[:5]}"
    assert sent | ambiguous == set(ends), Counter(ends.values())
    assert all(sends[i] == 1 for i in sent), "a SENT SMS never reached the simulator"
    assert set(sends) <= set(ends), "sends of unknown deliveries"
    assert ambiguous, "no kill struck a send in flight: the test did not test anything"
    assert {d["id"] for d in dead} == ambiguous
