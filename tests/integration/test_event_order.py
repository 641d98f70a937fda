"""A delivery's events are in the log in the order of its status changes, on PostgreSQL too,
where a transaction's id (the log's order) is taken at its first write, not at its commit
(docs/events.md, The feed): here a provider's status is applied by a transaction older
than the send's outcome, which commits in between."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import httpx
import pytest
import sqlalchemy as sa

from tests.helpers import eventually
from tests.integration.test_early_status import sent
from tests.integration.test_event_feed import all_events
from tests.integration.test_outcome_writes import _claimed
from tidings.clock import utcnow
from tidings.service import Service
from tidings.states import Status
from tidings.store import tracking
from tidings.store.engine import Database
from tidings.store.outcomes import write_outcomes
from tidings.store.schema import event, webhook_seen
from tidings.store.tracking import DeliveryKey, Tracked

PROVIDER = "sendgrid-main"


async def _waiting_for_a_lock(db: Database) -> bool:
    async with db.engine.connect() as conn:
        waiting = await conn.scalar(sa.text("SELECT count(*) FROM pg_locks WHERE NOT granted"))
    return bool(waiting)


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
async def test_delivered_follows_sent_when_its_transaction_is_older(
    client: httpx.AsyncClient, service: Service
) -> None:
    db = service.db
    [claimed] = await _claimed(client, db, 1)
    now = utcnow()
    async with db.engine.begin() as conn:  # pruned by the tracker's first write: its id
        old = {"provider": PROVIDER, "event_id": "old", "at": now - timedelta(days=4)}
        await conn.execute(sa.insert(webhook_seen).values(old))
    delivered = Tracked(DeliveryKey(claimed.id, None), "delivered", now, "e1", Status.DELIVERED)
    async with db.engine.connect() as racing:
        # The same provider event id, uncommitted: the tracker waits for it, id in hand.
        await racing.execute(
            sa.insert(webhook_seen).values(provider=PROVIDER, event_id="e1", at=now)
        )
        applying = asyncio.create_task(tracking.apply(db, PROVIDER, "email", [delivered], now))
        await eventually(lambda: _waiting_for_a_lock(db))
        await write_outcomes(db, [sent(claimed.id, claimed.attempts, now)], utcnow())
        await racing.rollback()
    assert (await applying).applied == 1

    async with db.engine.connect() as conn:
        tracker = await conn.scalar(
            sa.select(sa.text("xmin::text::bigint")).select_from(webhook_seen)
        )
        sender = await conn.scalar(sa.select(event.c.txid).where(event.c.type == "delivery.sent"))
    assert tracker < sender, "the tracker's transaction is not the older: no race was run"

    async def both() -> list[str] | None:
        kinds = [e["type"] for e in await all_events(client)]
        return kinds if len(kinds) == 2 else None

    assert await eventually(both) == ["delivery.sent", "delivery.delivered"]
