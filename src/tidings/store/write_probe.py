"""A write that commits and leaves nothing, for ``/readyz``: a database that answers reads
but refuses writes (read only, out of disk, permissions) must not look ready."""

from __future__ import annotations

import uuid

import sqlalchemy as sa

from tidings.clock import utcnow
from tidings.store.engine import Database
from tidings.store.schema import idempotency_key

# With a random key under it: the row can meet no request's.
PROBE_NAMESPACE = "tidings:readyz"


async def probe_write(db: Database) -> None:
    """Insert a row and delete it in one committed transaction: the commit makes the
    database write its log (WAL, or SQLite's journal) as any accepted request would."""
    key = uuid.uuid4().hex
    row = {
        "namespace": PROBE_NAMESPACE,
        "idempotency_key": key,
        "notification_id": uuid.uuid4(),
        "request_hash": "readyz",
        "created_at": utcnow(),
    }
    mine = (idempotency_key.c.namespace == PROBE_NAMESPACE) & (
        idempotency_key.c.idempotency_key == key
    )
    async with db.engine.begin() as conn:
        await conn.execute(sa.insert(idempotency_key).values(**row))
        await conn.execute(sa.delete(idempotency_key).where(mine))
