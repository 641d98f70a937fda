"""Crash test (docs/architecture.md, Claims, leases, fences and the reaper): SIGKILL the dispatcher
while work is flowing.

The API and the dispatcher run as real ``tidings`` subprocesses on PostgreSQL. 2,000
notifications are posted (single requests and batches) while the dispatcher is killed with
SIGKILL at random moments, at least three times, and restarted each time. Afterwards every
accepted delivery must be SENT exactly once in the database and its effect must have reached
the recording provider at least once. Sends repeated after a crash (sent, but killed before
the outcome was written) are counted and printed: infrastructure is at-least-once, and a
provider that dedupes by delivery id (its idempotency key) sees each effect exactly once.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from tests.helpers import put_templates
from tests.processes import (
    TidingsProcess,
    TidingsProcesses,
    free_port,
    tidings_env,
    tidings_processes,
    wait_ready,
)
from tidings.providers.testing import read_recording

NOTIFICATIONS = 2000
MIN_KILLS = 3
TYPE = "crash.receipt"
SEND_DELAY_MS = 2
POST_RATE = 300.0  # notifications per second: posting spans several kill cycles
RESERVE = 200  # posted one at a time until MIN_KILLS kills happened, so kills meet posting
TRICKLE_INTERVAL = 0.2
KILL_DELAY = (0.05, 1.2)  # seconds after a dispatcher's first send until it is killed
DOWN_TIME = (0.0, 0.4)  # seconds between a kill and the restart
PHASE_TIMEOUT = 60.0  # posting and killing
SETTLE_TIMEOUT = 30.0  # until every delivery is terminal after the last restart
UNFINISHED = ("PENDING", "QUEUED", "SENDING")
POST_RETRIES = 4
# Few HTTP connections, so the API holds few database connections: the PostgreSQL server
# may be shared with other test runs, and its max_connections is often just 100.
HTTP_LIMITS = httpx.Limits(max_connections=8, max_keepalive_connections=8)


@dataclass(frozen=True)
class Kill:
    pid: int
    alive_for: float  # seconds between its start and the SIGKILL
    sends: int  # lines the killed dispatcher appended to the recording
    outstanding: int  # deliveries not terminal at the kill (PENDING or SENDING)
    sending: int  # deliveries claimed at the kill
    while_posting: bool


@dataclass
class Accepted:
    notification_id: str
    delivery_ids: list[str]


@dataclass
class Run:
    """What the producer and the killer share."""

    recording: Path
    db: asyncpg.Connection
    processes: TidingsProcesses
    dispatcher: TidingsProcess
    rng: random.Random
    accepted: dict[str, Accepted] = field(default_factory=dict)
    kills: list[Kill] = field(default_factory=list)
    posting_done: asyncio.Event = field(default_factory=asyncio.Event)
    server_errors: list[str] = field(default_factory=list)  # 5xx answers, retried

    def recorded_bytes(self) -> int:
        try:
            return self.recording.stat().st_size
        except FileNotFoundError:
            return 0

    def recorded_lines(self) -> int:
        return len(read_recording(self.recording))

    async def delivery_counts(self) -> tuple[int, int]:
        row = await self.db.fetchrow(
            "SELECT count(*) FILTER (WHERE status = ANY($1::text[])) AS outstanding,"
            " count(*) FILTER (WHERE status = 'SENDING') AS sending FROM delivery",
            list(UNFINISHED),
        )
        assert row is not None
        return int(row["outstanding"]), int(row["sending"])


def _body(index: int) -> dict[str, Any]:
    return {"type": TYPE, "to": {"email": f"u{index}@example.com"}, "channels": ["email"]}


def _key(index: int) -> str:
    return f"crash-{index}"


def _record(run: Run, key: str, answer: dict[str, Any], retried: bool) -> None:
    deliveries = answer["deliveries"]
    assert [d["channel"] for d in deliveries] == ["email"], answer
    # A retried request may be answered from the stored notification, already in progress.
    assert retried or deliveries[0]["status"] == "PENDING", answer
    run.accepted[key] = Accepted(str(answer["id"]), [str(d["id"]) for d in deliveries])


async def _post(
    client: httpx.AsyncClient, run: Run, url: str, **kwargs: Any
) -> tuple[httpx.Response, bool]:
    """POST like a well-behaved producer: on a 5xx, again with the same idempotency key(s).
    Returns the response and whether it took a retry."""
    for attempt in range(POST_RETRIES + 1):
        response = await client.post(url, **kwargs)
        if response.status_code < 500 or attempt == POST_RETRIES:
            return response, attempt > 0
        run.server_errors.append(f"{response.status_code} {response.text[:200]}")
        await asyncio.sleep(0.05 * 2**attempt)
    raise AssertionError("unreachable")


async def _post_singles(client: httpx.AsyncClient, run: Run, indexes: list[int]) -> None:
    async def one(index: int) -> None:
        headers = {"Idempotency-Key": _key(index)}
        response, retried = await _post(
            client, run, "/v1/notifications", json=_body(index), headers=headers
        )
        assert response.status_code == 202, response.text
        _record(run, _key(index), response.json(), retried)

    await asyncio.gather(*(one(index) for index in indexes))


async def _post_batch(client: httpx.AsyncClient, run: Run, indexes: list[int]) -> None:
    items = [{"idempotencyKey": _key(index), **_body(index)} for index in indexes]
    response, retried = await _post(
        client, run, "/v1/notifications/batch", json={"notifications": items}
    )
    assert response.status_code == 200, response.text
    results = response.json()["results"]
    assert len(results) == len(indexes)
    for index, result in zip(indexes, results, strict=True):
        assert result["status"] == "accepted", result
        _record(run, _key(index), result, retried)


async def _produce(client: httpx.AsyncClient, run: Run) -> None:
    """Post every notification: paced chunks, then one at a time until enough kills."""
    started = time.monotonic()
    index = 0
    paced = NOTIFICATIONS - RESERVE
    while index < paced:
        size = min(run.rng.randint(1, 40), paced - index)
        chunk = list(range(index, index + size))
        post = _post_batch if run.rng.random() < 0.5 else _post_singles
        await post(client, run, chunk)
        index += size
        ahead = started + index / POST_RATE - time.monotonic()
        if ahead > 0:
            await asyncio.sleep(ahead)
    while index < NOTIFICATIONS and len(run.kills) < MIN_KILLS:
        await _post_singles(client, run, [index])
        index += 1
        await asyncio.sleep(TRICKLE_INTERVAL)
    while index < NOTIFICATIONS:
        size = min(50, NOTIFICATIONS - index)
        await _post_batch(client, run, list(range(index, index + size)))
        index += size
    run.posting_done.set()


async def _until(check: Callable[[], Awaitable[bool]], within: float, what: str) -> None:
    deadline = time.monotonic() + within
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {within}s")
        await asyncio.sleep(0.02)


async def _kill_repeatedly(run: Run) -> None:
    """Kill the dispatcher at random moments while it works, restart it, until posting is
    over and it was killed at least MIN_KILLS times."""
    while not (run.posting_done.is_set() and len(run.kills) >= MIN_KILLS):
        victim = run.dispatcher
        started = time.monotonic()
        size_at_start = run.recorded_bytes()
        lines_at_start = run.recorded_lines()

        async def sent_something(
            victim: TidingsProcess = victim, size: int = size_at_start
        ) -> bool:
            if not victim.is_running():
                raise AssertionError(f"dispatcher died on its own:\n{victim.log_tail()}")
            return run.recorded_bytes() > size

        await _until(sent_something, 20, f"dispatcher pid {victim.pid} sends")
        await asyncio.sleep(run.rng.uniform(*KILL_DELAY))
        if run.posting_done.is_set() and len(run.kills) >= MIN_KILLS:
            break
        # Kill only while work is outstanding, preferably mid-send (deliveries claimed).
        with contextlib.suppress(AssertionError):
            await _until(lambda: _has_claimed(run), 2, "claimed deliveries")
        outstanding, sending = 0, 0
        while outstanding == 0:  # the dispatcher may drain it between two reads: look again
            await _until(lambda: _has_outstanding(run), 10, "outstanding work to kill during")
            outstanding, sending = await run.delivery_counts()
        while_posting = not run.posting_done.is_set()
        code = await victim.kill_and_wait()
        assert code == -9, f"dispatcher exited with {code}, not by SIGKILL:\n{victim.log_tail()}"
        run.kills.append(
            Kill(
                victim.pid,
                time.monotonic() - started,
                run.recorded_lines() - lines_at_start,
                outstanding,
                sending,
                while_posting,
            )
        )
        await asyncio.sleep(run.rng.uniform(*DOWN_TIME))
        run.dispatcher = run.processes.start_dispatcher()


async def _has_claimed(run: Run) -> bool:
    _outstanding, sending = await run.delivery_counts()
    return sending > 0


async def _has_outstanding(run: Run) -> bool:
    outstanding, _sending = await run.delivery_counts()
    return outstanding > 0


async def _settled(run: Run) -> bool:
    if not run.dispatcher.is_running():
        raise AssertionError(f"last dispatcher died:\n{run.dispatcher.log_tail()}")
    outstanding, _sending = await run.delivery_counts()
    return outstanding == 0


@pytest.mark.slow
async def test_sigkilled_dispatcher_loses_nothing(pg_database_url: str, tmp_path: Path) -> None:
    seed = int(os.environ.get("CRASH_TEST_SEED", random.randrange(2**32)))
    print(f"\ncrash test seed {seed} (set CRASH_TEST_SEED to replay the same choices)")
    recording = tmp_path / "calls.log"
    spec = f"record:{recording}?delay_ms={SEND_DELAY_MS}"
    env = tidings_env(
        database_url=pg_database_url,
        providers={"email": spec, "sms": spec, "push": spec},
        lease_seconds=2,
        reaper_interval=0.5,
        outbox_dir=tmp_path / "outbox",
    )
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    began = time.monotonic()
    db = await asyncpg.connect(pg_database_url)
    try:
        with tidings_processes(env, tmp_path / "processes") as processes:
            api = processes.start_api(port)
            run = Run(recording, db, processes, processes.start_dispatcher(), random.Random(seed))
            await wait_ready(base_url, api)
            async with httpx.AsyncClient(
                base_url=base_url, timeout=30, limits=HTTP_LIMITS
            ) as client:
                body = {"category": "transactional", "priority": "normal", "channels": ["email"]}
                response = await client.put(f"/v1/types/{TYPE}", json=body)
                assert response.status_code == 201, response.text
                await put_templates(client, TYPE, ("email",))
                async with asyncio.timeout(PHASE_TIMEOUT):
                    await asyncio.gather(_produce(client, run), _kill_repeatedly(run))
                posted = time.monotonic()
                await _until(lambda: _settled(run), SETTLE_TIMEOUT, "every delivery terminal")
                settled = time.monotonic()
                await _check_replays(client, run)
                await _check_history(client, run)
            # SIGTERM: the last dispatcher and the API shut down gracefully.
            exits = {
                process.name: (await process.stop_and_wait(20), process.log_tail(15))
                for process in (run.dispatcher, api)
            }
        await _check_outcome(run)
    finally:
        await db.close()
    print(
        f"  posted and killed in {posted - began:.1f}s, settled {settled - posted:.1f}s later, "
        f"total {time.monotonic() - began:.1f}s"
    )
    unclean = {name: code for name, (code, _log) in exits.items() if code != 0}
    logs = "\n".join(f"--- {name}:\n{exits[name][1]}" for name in unclean)
    assert not unclean, f"exit codes after SIGTERM {unclean} (expected 0):\n{logs}"


async def _check_replays(client: httpx.AsyncClient, run: Run) -> None:
    """Posting a key again answers the stored notification and creates nothing."""
    for index in run.rng.sample(range(NOTIFICATIONS), 10):
        response = await client.post(
            "/v1/notifications", json=_body(index), headers={"Idempotency-Key": _key(index)}
        )
        assert response.status_code == 202, response.text
        assert response.headers.get("Idempotent-Replayed") == "true"
        stored = run.accepted[_key(index)]
        assert str(response.json()["id"]) == stored.notification_id
        assert [str(d["id"]) for d in response.json()["deliveries"]] == stored.delivery_ids


async def _check_history(client: httpx.AsyncClient, run: Run) -> None:
    """A delivery that a killed dispatcher held tells so in its history, and ended SENT."""
    notification_id = await run.db.fetchval(
        "SELECT d.notification_id FROM delivery_event e JOIN delivery d ON d.id = e.delivery_id"
        " WHERE e.kind = 'lease_expired' LIMIT 1"
    )
    if notification_id is None:  # no kill struck a delivery before its outcome was written
        return
    response = await client.get(f"/v1/notifications/{notification_id}")
    assert response.status_code == 200, response.text
    [delivery] = response.json()["deliveries"]
    kinds = [entry["kind"] for entry in delivery["history"]]
    assert delivery["status"] == "SENT", delivery
    assert delivery["attempts"] >= 2, delivery
    assert kinds[0] == "accepted" and kinds[-1] == "sent" and "lease_expired" in kinds, kinds


async def _check_outcome(run: Run) -> None:
    kills = run.kills
    for kill in kills:
        print(
            f"  killed pid {kill.pid} after {kill.alive_for:.2f}s: {kill.sends} sends by it, "
            f"{kill.outstanding} deliveries outstanding, {kill.sending} claimed"
            f"{', while posting' if kill.while_posting else ''}"
        )
    assert len(kills) >= MIN_KILLS
    assert sum(kill.while_posting for kill in kills) >= MIN_KILLS
    assert all(kill.sends > 0 for kill in kills), "a dispatcher was killed before it sent"
    assert all(kill.outstanding > 0 for kill in kills), kills
    assert any(kill.sending > 0 for kill in kills), "no kill struck claimed deliveries"

    # The database: every accepted notification with exactly its delivery, all SENT.
    assert len(run.accepted) == NOTIFICATIONS
    rows = await run.db.fetch(
        "SELECT n.id AS notification_id, n.idempotency_key, d.id AS delivery_id, d.status,"
        " d.attempts, d.failure_kind, d.last_error"
        " FROM notification n LEFT JOIN delivery d ON d.notification_id = n.id"
    )
    stored: dict[str, list[str]] = {}
    for row in rows:
        stored.setdefault(row["idempotency_key"], []).append(str(row["delivery_id"]))
    stored = {key: sorted(ids) for key, ids in stored.items()}
    expected = {key: sorted(a.delivery_ids) for key, a in run.accepted.items()}
    assert stored == expected, "the database does not hold exactly the accepted deliveries"
    statuses = Counter(row["status"] for row in rows)
    not_sent = [dict(row) for row in rows if row["status"] != "SENT"][:5]
    assert statuses == {"SENT": NOTIFICATIONS}, (statuses, not_sent)
    retried = sum(row["attempts"] > 1 for row in rows)

    # The provider: every SENT delivery's effect happened; nothing else was sent.
    sends = read_recording(run.recording)
    effects = set(sends)
    sent_ids = {str(row["delivery_id"]) for row in rows}
    assert sent_ids <= effects, f"{len(sent_ids - effects)} SENT deliveries never reached it"
    assert effects == sent_ids, f"{len(effects - sent_ids)} sends of unknown deliveries"
    duplicates = len(sends) - len(effects)
    events = Counter(row["kind"] for row in await run.db.fetch("SELECT kind FROM delivery_event"))
    print(
        f"  {len(kills)} kills, {NOTIFICATIONS} accepted, {statuses['SENT']} SENT, "
        f"{retried} needed more than one attempt, events {dict(events)}"
    )
    if run.server_errors:
        print(f"  {len(run.server_errors)} POSTs answered 5xx and retried: {run.server_errors[:3]}")
    print(
        f"  recording provider: {len(sends)} sends, {len(effects)} distinct effects, "
        f"{duplicates} duplicate sends (0 effects once it dedupes by delivery id)"
    )
    assert len(effects) == NOTIFICATIONS
