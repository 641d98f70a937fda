"""Writing outcomes back: a batch and its effects commit together, and the writer neither
dies nor drops an outcome when the database refuses one."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import httpx
import sqlalchemy as sa

from tests.helpers import post, put_type
from tidings.clock import utcnow
from tidings.dispatch.pipeline.outcomes import OutcomeWriter
from tidings.priorities import Priority
from tidings.service import Service
from tidings.states import Effect, FailureKind, Status
from tidings.store.claims import ClaimedDelivery, claim_due
from tidings.store.engine import Database
from tidings.store.outcomes import Outcome, write_outcomes
from tidings.store.schema import delivery, delivery_event, suppression

REFUSE = {
    "postgresql": [
        "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS"
        " $$ BEGIN RAISE EXCEPTION 'refused'; END $$",
        "CREATE TRIGGER refuse BEFORE INSERT ON suppression FOR EACH ROW EXECUTE FUNCTION refuse()",
    ],
    "sqlite": [
        "CREATE TRIGGER refuse BEFORE INSERT ON suppression"
        " BEGIN SELECT RAISE(ABORT, 'refused'); END",
    ],
}


async def _claimed(client: httpx.AsyncClient, db: Database, count: int) -> list[ClaimedDelivery]:
    await put_type(client, channels=("email",))
    for i in range(count):
        body = {"type": "order.confirmed", "to": {"email": f"user{i}@example.com"}}
        assert (await post(client, body)).status_code == 202
    now = utcnow()
    claimed = await claim_due(db, Priority.NORMAL, count, now, now + timedelta(seconds=60))
    assert len(claimed) == count
    return sorted(claimed, key=lambda c: c.address)


async def _rows(db: Database) -> dict[str, tuple[str, str | None]]:
    async with db.engine.connect() as conn:
        rows = await conn.execute(
            sa.select(delivery.c.address, delivery.c.status, delivery.c.failure_kind)
        )
        return {r.address: (r.status, r.failure_kind) for r in rows}


async def _count(db: Database, table: sa.Table) -> int:
    async with db.engine.connect() as conn:
        return int(await conn.scalar(sa.select(sa.func.count()).select_from(table)) or 0)


async def test_a_batch_and_its_effects_commit_together(
    client: httpx.AsyncClient, service: Service, backend: str
) -> None:
    db = service.db
    bounced, sent = await _claimed(client, db, 2)
    outcome = Outcome.failed(bounced, FailureKind.PERMANENT, "550 no such user")
    outcome.effect, outcome.effect_reason = Effect.SUPPRESS_ADDRESS, "hard_bounce"
    done = Outcome(
        delivery_id=sent.id,
        claimed_attempts=sent.attempts,
        status=Status.SENT,
        attempts=sent.attempts,
        sent_at=utcnow(),
    )
    events_before = await _count(db, delivery_event)
    async with db.engine.begin() as conn:
        for statement in REFUSE[backend]:
            await conn.execute(sa.text(statement))

    # The suppression cannot be written: nothing of the batch may be.
    try:
        await write_outcomes(db, [done, outcome], utcnow())
    except Exception:
        pass
    else:
        raise AssertionError("the refused suppression did not fail the batch")
    assert set((await _rows(db)).values()) == {("SENDING", None)}
    assert await _count(db, delivery_event) == events_before

    async with db.engine.begin() as conn:
        await conn.execute(
            sa.text("DROP TRIGGER refuse" + (" ON suppression" if backend == "postgresql" else ""))
        )
    await write_outcomes(db, [done, outcome], utcnow())
    assert await _rows(db) == {
        bounced.address: ("FAILED", "permanent"),
        sent.address: ("SENT", None),
    }
    assert await _count(db, suppression) == 1


async def test_the_writer_survives_an_outcome_the_database_refuses(
    client: httpx.AsyncClient, service: Service
) -> None:
    db = service.db
    refused, fine = await _claimed(client, db, 2)
    bad = Outcome.failed(refused, FailureKind.PERMANENT, "rejected")
    bad.event_detail = {"raw": b"\x00 not json"}  # no database can store this as JSON
    good = Outcome(
        delivery_id=fine.id,
        claimed_attempts=fine.attempts,
        status=Status.SENT,
        attempts=fine.attempts,
        sent_at=utcnow(),
    )
    writer = OutcomeWriter(db, flush_interval=0.001)
    stop = asyncio.Event()
    running = asyncio.create_task(writer.run(stop))
    try:
        writer.put(bad)
        writer.put(good)
        await asyncio.wait_for(writer.drained(), timeout=20)
        assert not running.done()
    finally:
        stop.set()
        await asyncio.wait_for(running, timeout=10)
    assert await _rows(db) == {
        refused.address: ("FAILED", "poison"),
        fine.address: ("SENT", None),
    }


async def test_a_batch_of_quiet_outcomes_writes_each_row_and_keeps_each_fence(
    client: httpx.AsyncClient, service: Service
) -> None:
    """Outcomes without events go in one statement on PostgreSQL (per row on SQLite): every
    field of each row lands, an outcome of an attempt that is no longer the row's changes
    nothing, and a row's template version is kept where the outcome has none."""
    db = service.db
    first, second, stale = await _claimed(client, db, 3)
    now = utcnow()
    retry_at = now + timedelta(seconds=30)
    outcomes = [
        Outcome(
            delivery_id=first.id,
            claimed_attempts=first.attempts,
            status=Status.SENT,
            attempts=first.attempts,
            provider="sim",
            provider_msg_id="m-1",
            sent_at=now,
            template_version=7,
        ),
        Outcome(
            delivery_id=second.id,
            claimed_attempts=second.attempts,
            status=Status.PENDING,
            attempts=second.attempts,
            next_attempt_at=retry_at,
            last_error="429 slow down",
            failure_kind=FailureKind.TRANSIENT,
        ),
        Outcome(  # the fence: an earlier attempt's outcome
            delivery_id=stale.id,
            claimed_attempts=stale.attempts - 1,
            status=Status.SENT,
            attempts=stale.attempts,
            sent_at=now,
        ),
    ]
    await write_outcomes(db, outcomes, now)
    columns = (delivery.c.id, delivery.c.status, delivery.c.provider_msg_id, delivery.c.sent_at)
    columns += (delivery.c.next_attempt_at, delivery.c.last_error, delivery.c.failure_kind)
    columns += (delivery.c.template_version, delivery.c.lease_until)
    async with db.engine.connect() as conn:
        rows = {r.id: r for r in await conn.execute(sa.select(*columns))}
    assert rows[first.id].status == "SENT" and rows[first.id].provider_msg_id == "m-1"
    assert rows[first.id].sent_at == now and rows[first.id].template_version == 7
    assert rows[first.id].lease_until is None
    assert rows[second.id].status == "PENDING" and rows[second.id].next_attempt_at == retry_at
    assert (rows[second.id].last_error, rows[second.id].failure_kind) == (
        "429 slow down",
        "transient",
    )
    assert rows[second.id].template_version is None
    assert rows[stale.id].status == "SENDING" and rows[stale.id].lease_until is not None
