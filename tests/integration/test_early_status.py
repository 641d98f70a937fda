"""A provider's status that outruns the outcome of its send (the delivery still SENDING:
outcomes are written in batches) waits, and is applied once the send is recorded, by the
reaper's round (store/tracking.settle_early): a delivered or bounced email never stays SENT."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from tests.integration.test_outcome_writes import _claimed, _rows
from tidings.clock import utcnow
from tidings.service import Service
from tidings.states import FailureKind, Status
from tidings.store import tracking
from tidings.store.outcomes import Outcome, write_outcomes
from tidings.store.schema import delivery
from tidings.store.tracking import DeliveryKey, Failure, Tracked


def sent(delivery_id: uuid.UUID, attempts: int, now: datetime) -> Outcome:
    """The send's outcome, naming the account the events come from (as a dispatcher's does)."""
    return Outcome(
        delivery_id=delivery_id,
        claimed_attempts=attempts,
        status=Status.SENT,
        attempts=attempts,
        provider="sendgrid-main",
        sent_at=now,
    )


async def test_a_status_that_outran_its_send_is_applied_after_it(
    client: httpx.AsyncClient, service: Service
) -> None:
    db = service.db
    delivered, bounced, failed, untouched = await _claimed(client, db, 4)
    now = utcnow()
    events = [
        Tracked(DeliveryKey(delivered.id, None), "delivered", now, "e1", Status.DELIVERED),
        Tracked(DeliveryKey(bounced.id, None), "delivered", now, "e2", Status.DELIVERED),
        Tracked(DeliveryKey(bounced.id, None), "bounced", now, "e3", Status.BOUNCED),
        Tracked(
            DeliveryKey(failed.id, None),
            "failed",
            now,
            "e4",
            Status.FAILED,
            failure=Failure(FailureKind.EXHAUSTED, "carrier gave up"),
        ),
    ]
    applied = await tracking.apply(db, "sendgrid-main", "email", events, now)
    assert applied.applied == 4
    assert await tracking.settle_early(db, utcnow()) == 0  # still being sent: they wait
    assert {s for s, _ in (await _rows(db)).values()} == {"SENDING"}

    outcomes = [sent(c.id, c.attempts, now) for c in (delivered, bounced, failed, untouched)]
    await write_outcomes(db, outcomes, utcnow())
    assert await tracking.settle_early(db, utcnow()) == 3
    rows = await _rows(db)
    assert rows[delivered.address] == ("DELIVERED", None)
    assert rows[bounced.address] == ("BOUNCED", None)
    assert rows[failed.address] == ("FAILED", "exhausted")
    assert rows[untouched.address] == ("SENT", None)
    assert await tracking.settle_early(db, utcnow()) == 0  # applied once


async def test_a_status_for_a_send_that_never_ends_is_dropped_after_a_day(
    client: httpx.AsyncClient, service: Service
) -> None:
    db = service.db
    [stuck] = await _claimed(client, db, 1)
    now = utcnow()
    event = Tracked(DeliveryKey(stuck.id, None), "delivered", now, "e9", Status.DELIVERED)
    await tracking.apply(db, "sendgrid-main", "email", [event], now)
    assert await tracking.settle_early(db, now + timedelta(days=2)) == 0
    done = sent(stuck.id, stuck.attempts, now)
    await write_outcomes(db, [done], utcnow())
    assert await tracking.settle_early(db, utcnow()) == 0  # gone: it waited too long
    assert (await _rows(db))[stuck.address] == ("SENT", None)


# SQLite runs one transaction at a time: nothing can commit in between there.
@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
async def test_a_send_recorded_between_the_move_and_the_wait_loses_no_status(
    client: httpx.AsyncClient, service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The provider's status finds the delivery SENDING, and the send's outcome commits
    right then, before the status is put to wait: it is still applied, not dropped."""
    db = service.db
    [racing] = await _claimed(client, db, 1)
    # An earlier attempt went through this account: the event is the account's at once.
    async with db.engine.begin() as conn:
        named = sa.update(delivery).where(delivery.c.id == racing.id)
        await conn.execute(named.values(provider="sendgrid-main"))
    now = utcnow()
    apply_moves = tracking._apply_moves

    async def moves_then_the_outcome(*args: Any) -> set[uuid.UUID]:
        moved = await apply_moves(*args)
        await write_outcomes(db, [sent(racing.id, racing.attempts, now)], utcnow())
        return moved

    monkeypatch.setattr(tracking, "_apply_moves", moves_then_the_outcome)
    event = Tracked(DeliveryKey(racing.id, None), "delivered", now, "e7", Status.DELIVERED)
    await tracking.apply(db, "sendgrid-main", "email", [event], now)
    monkeypatch.undo()
    assert (await _rows(db))[racing.address] == ("SENT", None)
    assert await tracking.settle_early(db, utcnow()) == 1
    assert (await _rows(db))[racing.address] == ("DELIVERED", None)
