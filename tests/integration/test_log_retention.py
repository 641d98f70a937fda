"""Retention of the event log's rows (store/log_retention.py): events, webhook messages
taken and the report's unique marks older than the cutoff go; what is newer, and messages
still waiting for their endpoint, stay."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa

from tests.integration.test_partitions import v7_at
from tidings.clock import utcnow
from tidings.store.engine import Database
from tidings.store.log_retention import prune_log
from tidings.store.schema import event, report_unique, webhook_message


def _event(at: datetime) -> dict[str, Any]:
    return {"type": "delivery.sent", "at": at, "notification_id": uuid.uuid4(), "data": {}}


def _message(at: datetime, status: str) -> dict[str, Any]:
    return {
        "id": v7_at(at),
        "endpoint_id": uuid.uuid4(),
        "order_key": uuid.uuid4(),
        "event_type": "delivery.sent",
        "body": "{}",
        "status": status,
        "attempts": 1,
        "next_attempt_at": at,
        "created_at": at,
    }


async def _all(db: Database, table: sa.Table, column: sa.Column[Any]) -> list[Any]:
    async with db.engine.connect() as conn:
        return sorted(row[0] for row in await conn.execute(sa.select(column)))


async def test_old_rows_of_the_event_log_go_and_waiting_messages_stay(db: Database) -> None:
    now = utcnow()
    old, recent = now - timedelta(days=40), now - timedelta(days=1)
    cutoff = (now - timedelta(days=30)).date()
    old_message, waiting = _message(old, "SENT"), _message(old, "PENDING")
    failed = _message(old, "FAILED")
    new_message = _message(recent, "SENT")
    old_mark, new_mark = v7_at(old), v7_at(recent)
    async with db.engine.begin() as conn:
        await conn.execute(sa.insert(event), [_event(old) for _ in range(7)])
        await conn.execute(sa.insert(event), [_event(recent) for _ in range(3)])
        await conn.execute(sa.insert(webhook_message), [old_message, waiting, failed, new_message])
        await conn.execute(
            sa.insert(report_unique),
            [
                {"delivery_id": old_mark, "metric": "opened"},
                {"delivery_id": old_mark, "metric": "clicked"},
                {"delivery_id": new_mark, "metric": "opened"},
            ],
        )
    pruned = await prune_log(db, cutoff, batch=2)  # several batches each
    assert (pruned.events, pruned.messages, pruned.marks) == (7, 1, 2)
    async with db.engine.connect() as conn:
        ats = [row.at for row in await conn.execute(sa.select(event.c.at))]
    assert len(ats) == 3 and all(abs((at - recent).total_seconds()) < 1 for at in ats)
    left = await _all(db, webhook_message, webhook_message.c.id)
    assert left == sorted([waiting["id"], failed["id"], new_message["id"]])
    assert await _all(db, report_unique, report_unique.c.delivery_id) == [new_mark]
    again = await prune_log(db, cutoff)
    assert (again.events, again.messages, again.marks) == (0, 0, 0)
