"""Crash test of campaign expansion (docs/architecture.md, Campaigns): SIGKILL the expanding
dispatcher three times during a 200,000-subscriber expansion; afterwards every subscriber
has exactly one delivery per channel.

Real ``tidings api`` and ``tidings dispatch`` processes on PostgreSQL. The users, their
devices and the topic's 200,000 followers are inserted with SQL; the type, its templates and
the campaign go through the API. Once the campaign's ``expanded`` count has advanced under a
dispatcher past about a quarter, a half and three quarters of the audience, that dispatcher
is SIGKILLed a random fraction of a page later and another is started at once; it takes the
campaign over after the expander's lease and resumes at the stored cursor. After the third
kill the last dispatcher finishes the expansion, and SQL checks that no page was lost or
stored twice: one notification per follower, one delivery per (user, channel, address), one
SKIPPED ``no_address`` push for users without an active device, and the campaign's counters
equal to the rows.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from tests.helpers import put_templates
from tests.processes import TidingsProcess, free_port, tidings_env, tidings_processes, wait_ready

SUBSCRIBERS = 200_000
KILLS = 3
PAGE_SIZE = 2_000
LEASE_SECONDS = 2
TYPE = "crash.presale"
TOPIC = "artist:crash"
# Users i with i % DEVICE_EVERY == 0 have an active device, those with
# i % TWO_DEVICES_EVERY == 0 a second one; i % INACTIVE_EVERY == 1 only an inactive one.
DEVICE_EVERY = 4
TWO_DEVICES_EVERY = 20
INACTIVE_EVERY = 10
KILL_DELAY = (0.0, 0.5)  # seconds after the count passed the kill's target until the SIGKILL
ADVANCE_TIMEOUT = 60.0  # for a (re)started dispatcher to store a page
FINISH_TIMEOUT = 120.0  # for the last dispatcher to finish the expansion


@dataclass(frozen=True)
class Kill:
    pid: int
    expander: str | None  # the campaign's expander at the kill
    expanded_before: int  # when the dispatcher was started
    expanded_at_kill: int  # read after it was gone
    alive_for: float


def _users_sql() -> list[str]:
    n = SUBSCRIBERS
    ts = "now()"
    return [
        "INSERT INTO user_profile (id, email, timezone, locale, created_at, updated_at)"
        f" SELECT 'u' || lpad(i::text, 6, '0'), 'u' || lpad(i::text, 6, '0') || '@example.com',"
        f" 'UTC', 'en', {ts}, {ts} FROM generate_series(0, {n - 1}) AS i",
        "INSERT INTO topic_subscription (topic, user_id, created_at)"
        f" SELECT '{TOPIC}', 'u' || lpad(i::text, 6, '0'), {ts}"
        f" FROM generate_series(0, {n - 1}) AS i",
        "INSERT INTO device (token, user_id, platform, active, created_at, updated_at)"
        " SELECT 'tok-a-' || lpad(i::text, 6, '0'), 'u' || lpad(i::text, 6, '0'), 'android',"
        f" true, {ts}, {ts} FROM generate_series(0, {n - 1}) AS i WHERE i % {DEVICE_EVERY} = 0",
        "INSERT INTO device (token, user_id, platform, active, created_at, updated_at)"
        " SELECT 'tok-b-' || lpad(i::text, 6, '0'), 'u' || lpad(i::text, 6, '0'), 'ios',"
        f" true, {ts}, {ts} FROM generate_series(0, {n - 1}) AS i"
        f" WHERE i % {TWO_DEVICES_EVERY} = 0",
        "INSERT INTO device (token, user_id, platform, active, deactivated_reason, created_at,"
        " updated_at)"
        " SELECT 'tok-x-' || lpad(i::text, 6, '0'), 'u' || lpad(i::text, 6, '0'), 'android',"
        f" false, 'unregistered', {ts}, {ts} FROM generate_series(0, {n - 1}) AS i"
        f" WHERE i % {INACTIVE_EVERY} = 1",
        "ANALYZE user_profile",
        "ANALYZE topic_subscription",
        "ANALYZE device",
    ]


async def _campaign(db: asyncpg.Connection, campaign_id: uuid.UUID) -> asyncpg.Record:
    row = await db.fetchrow(
        "SELECT status, expanded, deliveries, audience_size, cursor, expander FROM campaign"
        " WHERE id = $1",
        campaign_id,
    )
    assert row is not None
    return row


async def _wait_advance(
    db: asyncpg.Connection, campaign_id: uuid.UUID, dispatcher: TidingsProcess, beyond: int
) -> asyncpg.Record:
    """Until the campaign's ``expanded`` passes ``beyond`` (a page stored by ``dispatcher``)."""
    deadline = time.monotonic() + ADVANCE_TIMEOUT
    while True:
        if not dispatcher.is_running():
            raise AssertionError(f"dispatcher died on its own:\n{dispatcher.log_tail()}")
        row = await _campaign(db, campaign_id)
        if row["expanded"] > beyond:
            return row
        if time.monotonic() > deadline:
            raise AssertionError(
                f"expanded stayed at {row['expanded']} for {ADVANCE_TIMEOUT}s ({dict(row)}):\n"
                f"{dispatcher.log_tail()}"
            )
        await asyncio.sleep(0.01)


async def _wait_expanded(
    db: asyncpg.Connection, campaign_id: uuid.UUID, dispatcher: TidingsProcess, resumed_at: int
) -> tuple[asyncpg.Record, float]:
    """Until the expansion is over; the campaign then, and the users per second of the last
    dispatcher between its first stored page and the end."""
    deadline = time.monotonic() + FINISH_TIMEOUT
    first: tuple[float, int] | None = None
    while True:
        if not dispatcher.is_running():
            raise AssertionError(f"last dispatcher died:\n{dispatcher.log_tail()}")
        row = await _campaign(db, campaign_id)
        if first is None and row["expanded"] > resumed_at:
            first = (time.monotonic(), row["expanded"])
        if row["status"] in ("SENDING", "DONE"):
            assert first is not None
            elapsed = time.monotonic() - first[0]
            return row, (row["expanded"] - first[1]) / elapsed if elapsed > 0 else 0.0
        if time.monotonic() > deadline:
            raise AssertionError(
                f"not expanded within {FINISH_TIMEOUT}s ({dict(row)}):\n{dispatcher.log_tail()}"
            )
        await asyncio.sleep(0.01)


@pytest.mark.slow
async def test_sigkilled_expansion_gives_every_subscriber_one_delivery_per_channel(
    pg_database_url: str, tmp_path: Path
) -> None:
    seed = int(os.environ.get("CRASH_TEST_SEED", random.randrange(2**32)))
    rng = random.Random(seed)
    print(f"\ncampaign crash test seed {seed} (set CRASH_TEST_SEED to replay the kill delays)")
    noop = "noop"
    env = tidings_env(
        database_url=pg_database_url,
        providers={"email": noop, "push": noop, "sms": noop, "webhook": noop},
        outbox_dir=tmp_path / "outbox",
        secret_key="crash-test-secret",
        campaigns__lease_seconds=LEASE_SECONDS,
        campaigns__poll_interval=0.2,
        campaigns__page_size=PAGE_SIZE,
    )
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    began = time.monotonic()
    db = await asyncpg.connect(pg_database_url)
    try:
        for statement in _users_sql():
            await db.execute(statement)
        seeded = time.monotonic()
        with tidings_processes(env, tmp_path / "processes") as processes:
            api = processes.start_api(port)
            await wait_ready(base_url, api)
            async with httpx.AsyncClient(base_url=base_url, timeout=30) as client:
                body = {"category": "marketing", "priority": "low", "channels": ["email", "push"]}
                answer = await client.put(f"/v1/types/{TYPE}", json=body)
                assert answer.status_code == 201, answer.text
                await put_templates(client, TYPE, ("email", "push"))
                # Spread over a day: expansion is under test, not sending 300,000 messages
                # on two cores meanwhile (the first few hundred users fall due and are sent).
                campaign_body: dict[str, Any] = {
                    "type": TYPE,
                    "audience": {"topic": TOPIC},
                    "spreadOver": "1d",
                    "data": {"show": "crash"},
                }
                answer = await client.post(
                    "/v1/campaigns", json=campaign_body, headers={"Idempotency-Key": "crash-1"}
                )
                assert answer.status_code == 202, answer.text
                campaign_id = uuid.UUID(answer.json()["campaignId"])
                expansion_began = time.monotonic()

                kills: list[Kill] = []
                dispatcher = processes.start_dispatcher()
                expanded = 0
                for number in range(1, KILLS + 1):
                    started = time.monotonic()
                    # Past about number/(KILLS + 1) of the audience, by a page of this one.
                    share = number / (KILLS + 1) + rng.uniform(-0.08, 0.08)
                    target = max(expanded, int(SUBSCRIBERS * share))
                    await _wait_advance(db, campaign_id, dispatcher, target)
                    await asyncio.sleep(rng.uniform(*KILL_DELAY))
                    row = await _campaign(db, campaign_id)
                    assert row["status"] == "EXPANDING", (
                        f"the expansion ended before kill {number}: {dict(row)}"
                    )
                    code = await dispatcher.kill_and_wait()
                    assert code == -9, f"exited with {code}, not by SIGKILL:\n{dispatcher.log()}"
                    row = await _campaign(db, campaign_id)  # what the killed one left behind
                    kills.append(
                        Kill(
                            dispatcher.pid,
                            row["expander"],
                            expanded,
                            row["expanded"],
                            time.monotonic() - started,
                        )
                    )
                    expanded = row["expanded"]
                    dispatcher = processes.start_dispatcher()
                finished, last_rate = await _wait_expanded(db, campaign_id, dispatcher, expanded)
                expansion_ended = time.monotonic()
                shown = (await client.get(f"/v1/campaigns/{campaign_id}")).json()
            exits = {p.name: await p.stop_and_wait(20) for p in (dispatcher, api)}
        await _check_rows(db, campaign_id, finished, shown)
        last_expander = await db.fetchval(
            "SELECT expander FROM campaign WHERE id = $1", campaign_id
        )
    finally:
        await db.close()

    expansion = expansion_ended - expansion_began
    for kill in kills:
        print(
            f"  killed pid {kill.pid} after {kill.alive_for:.2f}s: expanded"
            f" {kill.expanded_before} -> {kill.expanded_at_kill} (expander {kill.expander})"
        )
    print(
        f"  seeded {SUBSCRIBERS} users in {seeded - began:.1f}s; expansion with {KILLS} kills"
        f" took {expansion:.1f}s ({SUBSCRIBERS / expansion:.0f} users/s overall, including"
        f" {KILLS} x {LEASE_SECONDS}s leases and restarts); total {time.monotonic() - began:.1f}s"
    )
    print(f"  the last dispatcher, uninterrupted: {last_rate:.0f} users/s (load {os.getloadavg()})")
    assert len(kills) == KILLS
    for kill in kills:
        assert 0 < kill.expanded_at_kill < SUBSCRIBERS, kill
        assert kill.expanded_at_kill > kill.expanded_before, kill
        assert kill.expander is not None and f":{kill.pid}:" in kill.expander, kill
    # The last dispatcher took the campaign over and finished it.
    assert last_expander is not None and f":{dispatcher.pid}:" in last_expander, last_expander
    assert exits == {"dispatch": 0, "api": 0}, exits


async def _check_rows(
    db: asyncpg.Connection,
    campaign_id: uuid.UUID,
    finished: asyncpg.Record,
    shown: dict[str, Any],
) -> None:
    notifications = await db.fetchrow(
        "SELECT count(*) AS rows, count(DISTINCT user_id) AS users,"
        " count(DISTINCT idempotency_key) AS keys FROM notification WHERE campaign_id = $1",
        campaign_id,
    )
    assert notifications is not None
    assert dict(notifications) == {"rows": SUBSCRIBERS, "users": SUBSCRIBERS, "keys": SUBSCRIBERS}
    strays = await db.fetchval(
        "SELECT count(*) FROM notification n WHERE n.campaign_id = $1 AND n.idempotency_key"
        " <> 'campaign:' || $1::text || ':' || n.user_id",
        campaign_id,
    )
    assert strays == 0
    followers_missing = await db.fetchval(
        "SELECT count(*) FROM topic_subscription s WHERE s.topic = $1 AND NOT EXISTS"
        " (SELECT 1 FROM notification n WHERE n.campaign_id = $2 AND n.user_id = s.user_id)",
        TOPIC,
        campaign_id,
    )
    assert followers_missing == 0

    # Every delivery belongs to a notification of the campaign, and the other way round.
    mismatched = await db.fetchval(
        "SELECT count(*) FROM delivery d LEFT JOIN notification n ON n.id = d.notification_id"
        " WHERE d.campaign_id = $1 AND (n.campaign_id IS DISTINCT FROM $1)",
        campaign_id,
    )
    assert mismatched == 0

    # Email: exactly one delivery per user, to the user's address.
    email = await db.fetchrow(
        "SELECT count(*) AS rows, count(DISTINCT n.user_id) AS users,"
        " count(*) FILTER (WHERE d.address <> n.user_id || '@example.com') AS wrong_address"
        " FROM delivery d JOIN notification n ON n.id = d.notification_id"
        " WHERE d.campaign_id = $1 AND d.channel = 'email'",
        campaign_id,
    )
    assert email is not None
    assert dict(email) == {"rows": SUBSCRIBERS, "users": SUBSCRIBERS, "wrong_address": 0}

    # Push: exactly one row per (user, active token); users without an active device have
    # exactly one SKIPPED no_address row and nothing else.
    doubled = await db.fetch(
        "SELECT n.user_id, d.channel, d.address, count(*) AS rows"
        " FROM delivery d JOIN notification n ON n.id = d.notification_id"
        " WHERE d.campaign_id = $1 GROUP BY n.user_id, d.channel, d.address"
        " HAVING count(*) <> 1 LIMIT 5",
        campaign_id,
    )
    assert doubled == [], [dict(row) for row in doubled]
    expected_push = await db.fetchval(
        "SELECT count(*) FROM device WHERE active AND user_id IN"
        " (SELECT user_id FROM topic_subscription WHERE topic = $1)",
        TOPIC,
    )
    users_with_device = await db.fetchval("SELECT count(DISTINCT user_id) FROM device WHERE active")
    push = await db.fetchrow(
        "SELECT count(*) FILTER (WHERE d.address <> '') AS addressed,"
        " count(*) FILTER (WHERE d.address <> '' AND NOT EXISTS (SELECT 1 FROM device v"
        "   WHERE v.token = d.address AND v.user_id = n.user_id AND v.active)) AS wrong_token,"
        " count(*) FILTER (WHERE d.address = '') AS unaddressed,"
        " count(*) FILTER (WHERE d.address = '' AND d.status = 'SKIPPED'"
        "   AND d.skip_reason = 'no_address') AS skipped_no_address,"
        " count(DISTINCT n.user_id) AS users"
        " FROM delivery d JOIN notification n ON n.id = d.notification_id"
        " WHERE d.campaign_id = $1 AND d.channel = 'push'",
        campaign_id,
    )
    assert push is not None
    assert dict(push) == {
        "addressed": expected_push,
        "wrong_token": 0,
        "unaddressed": SUBSCRIBERS - users_with_device,
        "skipped_no_address": SUBSCRIBERS - users_with_device,
        "users": SUBSCRIBERS,
    }
    # A user with an active device has no SKIPPED push row beside its real ones.
    mixed = await db.fetchval(
        "SELECT count(*) FROM (SELECT n.user_id FROM delivery d"
        " JOIN notification n ON n.id = d.notification_id"
        " WHERE d.campaign_id = $1 AND d.channel = 'push'"
        " GROUP BY n.user_id HAVING bool_or(d.address = '') AND bool_or(d.address <> '')) m",
        campaign_id,
    )
    assert mixed == 0
    other_channels = await db.fetchval(
        "SELECT count(*) FROM delivery WHERE campaign_id = $1 AND channel NOT IN ('email', 'push')",
        campaign_id,
    )
    assert other_channels == 0

    # The campaign's counters are the rows.
    rows = await db.fetchval("SELECT count(*) FROM delivery WHERE campaign_id = $1", campaign_id)
    assert rows == SUBSCRIBERS + expected_push + SUBSCRIBERS - users_with_device
    final = await _campaign(db, campaign_id)
    assert final["status"] in ("SENDING", "DONE"), dict(final)
    assert final["audience_size"] == SUBSCRIBERS
    assert final["expanded"] == SUBSCRIBERS, dict(final)
    assert final["deliveries"] == rows, dict(final)
    assert finished["expanded"] == SUBSCRIBERS
    assert shown["expanded"] == SUBSCRIBERS and shown["deliveries"] == rows, shown
    print(
        f"  {SUBSCRIBERS} notifications, {rows} deliveries ({SUBSCRIBERS} email,"
        f" {expected_push} push, {SUBSCRIBERS - users_with_device} push skipped no_address),"
        f" campaign {final['status']}"
    )
