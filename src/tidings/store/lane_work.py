"""Whether a direct lane has work: a due PENDING delivery of its priority (its stall watch,
dispatch/lanes/progress.py). One indexed row at most, on SQLite and PostgreSQL alike."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa

from tidings.priorities import Priority
from tidings.store.engine import Database
from tidings.store.schema import delivery


async def has_due(db: Database, priority: Priority, now: datetime) -> bool:
    query = (
        sa.select(delivery.c.id)
        .where(
            delivery.c.status == "PENDING",
            delivery.c.priority == priority.value,
            delivery.c.next_attempt_at <= now,
        )
        .limit(1)
    )
    async with db.engine.connect() as conn:
        return (await conn.execute(query)).first() is not None
