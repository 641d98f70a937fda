"""Dispatch on day partitions by name (docs/architecture.md, Retention and partitions): the
claims, outcome writes and the Kafka transport's statements name one day's partitions, so
they take few locks whatever the number of days; every due delivery, in any day, is claimed
and sent once; a day made after the dispatcher started is claimed from at once; a
delivery's id names its notification's day."""

from __future__ import annotations

import asyncio
import dataclasses
import random
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

import asyncpg
import httpx
import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

from tests.helpers import eventually, post, put_type, running_dispatcher
from tests.integration.test_partitions import draft, v7_at
from tests.integration.test_state_machine import DeliveryMachine
from tests.unit.test_campaign_planning import campaign
from tidings.campaigns.expansion import Planner, Recipients
from tidings.clock import utcnow
from tidings.priorities import Priority
from tidings.providers.testing import ScriptedProvider
from tidings.service import Service
from tidings.states import Status
from tidings.store import claims, outcomes, partition_days, partitions
from tidings.store.claims import claim_due, claim_in_days
from tidings.store.engine import Database, connect
from tidings.store.intake import NotificationDraft, accept
from tidings.store.outcomes import Outcome, write_outcomes
from tidings.store.partitions import (
    attached,
    enable_partitions,
    ensure_partitions,
    partition_name,
    run_retention,
)
from tidings.store.queue import Due, claim_queued, relay_due
from tidings.store.users import UserProfile

LEASE = timedelta(seconds=60)


@pytest.fixture
async def database_url(pg_plain_database_url: str) -> str:
    """PostgreSQL on day partitions, today's alone (no day ahead yet: converted from plain
    tables by `tidings partitions enable`'s code): the service, client and db fixtures use
    it."""
    db = connect(pg_plain_database_url)
    try:
        await enable_partitions(db, utcnow().date(), 0)
    finally:
        await db.dispose()
    return pg_plain_database_url


@pytest.fixture
async def pg(database_url: str) -> AsyncIterator[Database]:
    db = connect(database_url)
    yield db
    await db.dispose()


def made_at(
    at: datetime,
    key: str,
    *,
    delivery_at: datetime | None = None,
    send_at: datetime | None = None,
) -> NotificationDraft:
    """A PENDING email notification whose id was made at ``at`` (its delivery's at
    ``delivery_at``, the same by default)."""
    return draft(at, key, Status.PENDING, delivery_at=delivery_at, send_at=send_at)


async def fetch(db: Database, query: str, *args: Any) -> list[Any]:
    async with db.asyncpg() as conn:
        return list(await conn.fetch(query, *args))


async def statuses(db: Database, ids: list[uuid.UUID]) -> dict[uuid.UUID, tuple[str, int]]:
    rows = await fetch(db, "SELECT id, status, attempts FROM delivery WHERE id = ANY($1)", ids)
    return {row["id"]: (row["status"], row["attempts"]) for row in rows}


async def relation_locks(conn: Any) -> int:
    """The relation locks this backend holds (inside a transaction: all it took)."""
    found: int = await conn.fetchval(
        "SELECT count(*) FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'relation'"
    )
    return found


async def test_due_deliveries_of_every_day_are_claimed_and_sent_once(
    client: httpx.AsyncClient, service: Service, pg: Database
) -> None:
    await put_type(client, channels=("email",))
    now = utcnow()
    old, ahead, far = now - timedelta(days=20), now + timedelta(days=1), now + timedelta(days=3)
    await ensure_partitions(pg, old.date(), 0)
    await ensure_partitions(pg, now.date(), 3)
    # An old day's notification, scheduled for now, whose first attempt failed: a retry due.
    retry = made_at(old, "old-retry", send_at=now)
    await accept(pg, [retry], old)
    await fetch(
        pg,
        "UPDATE delivery SET attempts = 1, next_attempt_at = $2 WHERE id = $1",
        retry.deliveries[0].id,
        now,
    )
    # Days ahead (made by processes whose clocks run ahead), due now.
    early, earlier = made_at(ahead, "ahead"), made_at(far, "far-ahead")
    await accept(pg, [early, earlier], now)
    for n in range(5):
        body = {"type": "order.confirmed", "to": {"email": f"today{n}@example.com"}}
        assert (await post(client, body)).status_code == 202
    ids = [row["id"] for row in await fetch(pg, "SELECT id FROM delivery")]
    assert len(ids) == 8
    provider = ScriptedProvider()
    async with running_dispatcher(service, provider):

        async def all_sent() -> bool:
            return all(s == "SENT" for s, _ in (await statuses(pg, ids)).values())

        await eventually(all_sent)
        await asyncio.sleep(0.3)  # nothing is sent again
    sends = Counter(call.delivery_id for call in provider.completed)
    assert sends == Counter(ids), sends
    found = await statuses(pg, ids)
    assert found[retry.deliveries[0].id] == ("SENT", 2)
    assert found[early.deliveries[0].id] == ("SENT", 1)
    rows = await fetch(pg, "SELECT tableoid::regclass::text AS part, id FROM delivery")
    where = {row["id"]: row["part"] for row in rows}
    assert where[retry.deliveries[0].id] == partition_name("delivery", old.date())
    assert where[early.deliveries[0].id] == partition_name("delivery", ahead.date())
    assert where[earlier.deliveries[0].id] == partition_name("delivery", far.date())


async def test_a_day_made_after_the_dispatcher_started_is_claimed_from_at_once(
    client: httpx.AsyncClient, service: Service, pg: Database
) -> None:
    await put_type(client, channels=("email",))
    provider = ScriptedProvider()
    async with running_dispatcher(service, provider):
        body = {"type": "order.confirmed", "to": {"email": "first@example.com"}}
        assert (await post(client, body)).status_code == 202
        await eventually(lambda: provider.completed)  # claiming, without tomorrow's day
        now = utcnow()
        tomorrow = now.date() + timedelta(days=1)
        async with pg.asyncpg() as conn:
            assert tomorrow not in (await attached(conn))["delivery"]
        await ensure_partitions(pg, tomorrow, 0)  # made by another process's maintenance
        late = made_at(now + timedelta(days=1), "tomorrow")
        await accept(pg, [late], now)
        [delivery_id] = [d.id for d in late.deliveries]

        async def sent() -> bool:
            return (await statuses(pg, [delivery_id]))[delivery_id][0] == "SENT"

        # Well within the minute after which the dispatcher reads the days again.
        await eventually(sent, within=5)
    assert [c.delivery_id for c in provider.completed].count(delivery_id) == 1


async def test_at_midnight_the_new_days_partition_is_claimed_from(pg: Database) -> None:
    now = utcnow()
    assert await claim_due(pg, Priority.NORMAL, 10, now, now + LEASE) == []
    read = (await partition_days.day_tables(pg, now.date())).refreshed
    tomorrow = now.date() + timedelta(days=1)
    await ensure_partitions(pg, tomorrow, 0)
    midnight = datetime.combine(tomorrow, time(), UTC)
    first = made_at(midnight + timedelta(seconds=30), "first-of-the-day")
    await accept(pg, [first], midnight + timedelta(seconds=30))
    later = midnight + timedelta(minutes=1)
    [claimed] = await claim_due(pg, Priority.NORMAL, 10, later, later + LEASE)
    assert claimed.id == first.deliveries[0].id
    assert (await partition_days.day_tables(pg, tomorrow)).refreshed == read  # no refresh


async def test_a_day_dropped_since_the_dispatcher_read_the_days_is_passed_over(
    pg: Database,
) -> None:
    now = utcnow()
    old = now - timedelta(days=40)
    await ensure_partitions(pg, old.date(), 0)
    item = made_at(old, "forty-days-ago", send_at=now)
    await accept(pg, [item], old)
    [claimed] = await claim_due(pg, Priority.NORMAL, 10, now, now + LEASE)
    sent = Outcome(delivery_id=claimed.id, claimed_attempts=1, status=Status.SENT, attempts=1)
    await write_outcomes(pg, [sent], now)
    report = await run_retention(pg, now, retention_days=30, idempotency_days=7)
    assert report.dropped_days == [old.date()]
    tables = await partition_days.day_tables(pg, now.date())
    assert old.date() in tables.days  # read before the drop: the claims meet the gap
    assert await claim_due(pg, Priority.NORMAL, 10, now, now + LEASE) == []
    assert old.date() not in tables.days
    await write_outcomes(pg, [sent], now)  # a stale outcome of that day changes nothing

    async def publish(due: list[Due], until: datetime) -> None:
        raise AssertionError("nothing is due")

    tables.days |= {old.date()}
    assert await relay_due(pg, Priority.NORMAL, 10, now, now + LEASE, publish) == 0
    assert await claim_queued(pg, [(claimed.id, now)], now, now + LEASE) == []


async def test_days_with_deliveries_in_progress_are_found_past_one_statements_days(
    pg: Database,
) -> None:
    now = utcnow()
    first = now - timedelta(days=45)
    await ensure_partitions(pg, first.date(), 44)
    live = [first, first + timedelta(days=partitions.LIVE_CHUNK + 2)]
    await accept(pg, [made_at(at, f"live-{at:%j}") for at in live], now)
    finished = made_at(first + timedelta(days=3), "finished")
    finished.deliveries[0].status = Status.SKIPPED
    await accept(pg, [finished], now)
    async with pg.asyncpg() as conn:
        days = (await attached(conn))["delivery"]
        assert len(days) > partitions.LIVE_CHUNK
        assert await partitions.live_days(conn, days) == {at.date() for at in live}


async def test_a_partition_of_no_day_keeps_the_claims_on_the_parents(pg: Database) -> None:
    """Tables partitioned otherwise as well (here a DEFAULT partition, which tidings never
    makes): a row there is still claimed and written back, through the parents."""
    async with pg.asyncpg() as conn:
        for table in ("notification", "delivery", "delivery_event"):
            await conn.execute(f"CREATE TABLE {table}_other PARTITION OF {table} DEFAULT")
    now = utcnow()
    item = made_at(now - timedelta(days=10), "no-day-of-its-own", send_at=now)
    await accept(pg, [item], now)
    [claimed] = await claim_due(pg, Priority.NORMAL, 10, now, now + LEASE)
    assert claimed.id == item.deliveries[0].id
    sent = Outcome(delivery_id=claimed.id, claimed_attempts=1, status=Status.SENT, attempts=1)
    await write_outcomes(pg, [sent], now)
    assert await statuses(pg, [claimed.id]) == {claimed.id: ("SENT", 1)}
    assert not (await partition_days.day_tables(pg, now.date())).partitioned


async def test_a_claim_takes_as_many_locks_on_38_days_as_on_3(
    pg_plain_database_url: str,
) -> None:
    db = connect(pg_plain_database_url)
    try:
        today = utcnow().date()
        await enable_partitions(db, today, 2)
        on_3 = await _claim_locks(db, today, "three")
        await ensure_partitions(db, today - timedelta(days=35), 37)
        async with db.asyncpg() as conn:
            assert len((await attached(conn))["delivery"]) == 38
        on_38 = await _claim_locks(db, today, "thirty-eight")
        on_parent = await _claim_locks(db, None, "parent")
    finally:
        await db.dispose()
    # Planned (the first time on a connection) and prepared: the same on 3 days and on 38,
    # one day's two tables (and their indexes while planning).
    assert on_3 == on_38, (on_3, on_38)
    assert max(on_38) <= 40, on_38
    # The same statements on the parents: every partition of both tables, at every claim.
    assert min(on_parent) > 2 * 38, on_parent


async def _claim_locks(db: Database, day: date | None, key: str) -> tuple[int, int]:
    """The relation locks a claim of two deliveries and one outcome take, in a transaction
    on a new connection: planned, then again as prepared statements (generic plans, as
    asyncpg's statement cache runs them). On ``day``'s partitions by name, or on the
    parents (None) as on plain tables."""
    conn = await asyncpg.connect(db.url.render_as_string(False).replace("+asyncpg", ""))
    try:
        await conn.execute("SET plan_cache_mode = force_generic_plan")
        planned = await _claim_and_count(db, conn, day, f"{key}-planned")
        prepared = await _claim_and_count(db, conn, day, f"{key}-prepared")
    finally:
        await conn.close()
    return planned, prepared


async def _claim_and_count(db: Database, conn: Any, day: date | None, key: str) -> int:
    now = utcnow()
    await accept(db, [made_at(now, f"{key}-{n}") for n in range(2)], now)
    async with conn.transaction():
        if day is None:
            args = (Priority.NORMAL.value, now, 2, now + LEASE)
            rows = await conn.fetch(claims._pg_claim_in(None, False), *args)
            claimed = [claims.claimed_from_row(row) for row in rows]
        else:
            claimed = await claim_in_days(
                conn, [day], Priority.NORMAL, 2, now, now + LEASE, None, lambda gone: None
            )
        assert len(claimed) == 2
        first = claimed[0].id
        sent = Outcome(delivery_id=first, claimed_attempts=1, status=Status.SENT, attempts=1)
        statement = outcomes._pg_statement(first, day is not None) + " RETURNING id"
        assert await conn.fetchval(statement, *outcomes._pg_row(sent, now)) == first
        return await relation_locks(conn)


async def test_the_kafka_relay_and_claim_by_id_take_every_day_by_name(pg: Database) -> None:
    now = utcnow()
    old, ahead = now - timedelta(days=20), now + timedelta(days=1)
    await ensure_partitions(pg, old.date(), 0)
    await ensure_partitions(pg, now.date(), 1)
    drafts = [made_at(old, "old", send_at=now), made_at(now, "today"), made_at(ahead, "ahead")]
    await accept(pg, drafts[:1], old)
    await accept(pg, drafts[1:], now)
    ids = sorted(d.deliveries[0].id for d in drafts)
    published: list[Due] = []

    async def publish(due: list[Due], until: datetime) -> None:
        published.extend(due)

    queued_until = now + timedelta(seconds=30)
    assert await relay_due(pg, Priority.NORMAL, 10, now, queued_until, publish) == 3
    assert published[0].id == drafts[0].deliveries[0].id  # the oldest day first
    assert sorted(d.id for d in published) == ids
    assert await relay_due(pg, Priority.NORMAL, 10, now, queued_until, publish) == 0
    assert {s for s, _ in (await statuses(pg, ids)).values()} == {"QUEUED"}
    # Every ticket twice, and one of a day that has no partition (stale, from long ago).
    stale = (v7_at(now - timedelta(days=90)), queued_until)
    tickets = [(i, queued_until) for i in ids] * 2 + [stale]
    claimed = await claim_queued(pg, tickets, now, now + LEASE)
    assert sorted(c.id for c in claimed) == ids
    assert await claim_queued(pg, tickets, now, now + LEASE) == []
    assert (await statuses(pg, ids)) == {i: ("SENDING", 1) for i in ids}


async def test_a_delivery_made_a_midnight_away_from_its_notification_is_found(
    pg: Database,
) -> None:
    """Deliveries made before ids were made in their notification's millisecond: one made
    just before midnight, its notification just after, lives in the notification's day."""
    midnight = datetime.combine(utcnow().date(), time(), UTC)
    before, after = midnight - timedelta(milliseconds=1), midnight + timedelta(milliseconds=1)
    await ensure_partitions(pg, before.date(), 0)
    items = [made_at(after, f"edge-{n}", delivery_at=before) for n in range(2)]
    await accept(pg, items, after)
    now = utcnow()
    first, second = (item.deliveries[0].id for item in items)
    await fetch(
        pg, "UPDATE delivery SET status = 'QUEUED', lease_until = $2 WHERE id = $1", second, now
    )
    [claimed] = await claim_due(pg, Priority.NORMAL, 10, now, now + LEASE)
    assert claimed.id == first
    [queued] = await claim_queued(pg, [(second, now)], now, now + LEASE)
    assert queued.id == second
    done = [
        Outcome(delivery_id=c.id, claimed_attempts=1, status=Status.SENT, attempts=1)
        for c in (claimed, queued)
    ]
    await write_outcomes(pg, done, now)
    assert await statuses(pg, [first, second]) == {first: ("SENT", 1), second: ("SENT", 1)}


async def test_delivery_ids_are_made_in_their_notifications_millisecond(
    client: httpx.AsyncClient, pg: Database
) -> None:
    await put_type(client, channels=("email", "sms"))
    body = {"type": "order.confirmed", "to": {"email": "a@example.com", "phone": "+15550100"}}
    response = await post(client, body)
    assert response.status_code == 202, response.text
    accepted = response.json()
    made = [uuid.UUID(accepted["id"]), *(uuid.UUID(d["id"]) for d in accepted["deliveries"])]
    # A campaign's: one user with an email and two devices.
    profile = UserProfile("u1", "u1@example.com", None, None, None, None, None, utcnow(), utcnow())
    promo = dataclasses.replace(campaign(1), channels=["email", "push"])
    recipients = Recipients({"u1": profile}, {"u1": ["device-a", "device-b"]})
    [planned] = Planner(promo, 0, random.Random(1)).drafts(["u1"], 0, recipients)
    for notification_id, delivery_ids in (
        (made[0], made[1:]),
        (planned.id, [d.id for d in planned.deliveries]),
    ):
        assert len(delivery_ids) in (2, 3)
        assert delivery_ids == sorted(delivery_ids)  # in the order they were made
        for value in delivery_ids:
            assert value.version == 7 and value.variant == uuid.RFC_4122
            assert value.int >> 80 == notification_id.int >> 80
    rows = await fetch(pg, "SELECT tableoid::regclass::text AS part, notification_id FROM delivery")
    assert {r["part"] for r in rows} == {partition_name("delivery", utcnow().date())}


def test_the_delivery_state_machine_on_day_partitions(database_url: str) -> None:
    """The state machine of tests/integration/test_state_machine.py, on a partitioned database."""

    class OnDayPartitions(DeliveryMachine):
        url = database_url

    run_state_machine_as_test(
        OnDayPartitions,
        settings=settings(max_examples=25, stateful_step_count=40, deadline=None),
    )
