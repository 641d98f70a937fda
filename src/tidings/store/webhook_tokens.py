"""Signed-request tokens already accepted (Mailgun's ``signature.token``), kept with the
event ids of ``webhook_seen`` so that every API process refuses a replayed signature.

A token is claimed before its events are applied and forgotten again if applying fails, so
that the provider's retry of a request tidings could not write is not refused as a replay.
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa

from tidings.store.engine import Database
from tidings.store.schema import webhook_seen
from tidings.store.upsert import insert

# Distinguishes tokens from the provider's event ids in webhook_seen.
_PREFIX = "token:"


async def first_use(db: Database, provider: str, token: str, now: datetime) -> bool:
    """Claim ``token`` for account ``provider``: True the first time, False ever after
    (rows are pruned with webhook_seen's, days after a signature's timestamp went stale)."""
    statement = (
        insert(db, webhook_seen)
        .values(provider=provider, event_id=_PREFIX + token, at=now)
        .on_conflict_do_nothing()
        .returning(webhook_seen.c.event_id)
    )
    async with db.engine.begin() as conn:
        return (await conn.execute(statement)).first() is not None


async def forget(db: Database, provider: str, token: str) -> None:
    """Release a claimed token whose request was not applied."""
    statement = sa.delete(webhook_seen).where(
        webhook_seen.c.provider == provider, webhook_seen.c.event_id == _PREFIX + token
    )
    async with db.engine.begin() as conn:
        await conn.execute(statement)
