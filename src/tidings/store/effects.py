"""What a permanent provider error means beyond its delivery: a push token that is gone is
deactivated, and an address that bounced hard (or asked to stop) is suppressed."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import sqlalchemy as sa

from tidings.policy.suppression import canonical_address
from tidings.providers.base import Effect
from tidings.store import suppressions
from tidings.store.claims import Outcome
from tidings.store.engine import Database
from tidings.store.schema import delivery, device


async def apply_effects(db: Database, outcomes: Sequence[Outcome], now: datetime) -> None:
    """Idempotent, so a batch written again after a failure does no harm."""
    wanted = {o.delivery_id: o for o in outcomes if o.effect is not None}
    if not wanted:
        return
    query = sa.select(delivery.c.id, delivery.c.channel, delivery.c.address).where(
        delivery.c.id.in_(list(wanted))
    )
    async with db.engine.connect() as conn:
        rows = (await conn.execute(query)).all()
    for row in rows:
        outcome = wanted[row.id]
        reason = outcome.effect_reason or outcome.effect or "provider"
        if outcome.effect == Effect.DEACTIVATE_DEVICE.value:
            await _deactivate(db, row.address, reason, now)
        elif outcome.effect == Effect.SUPPRESS_ADDRESS.value:
            address = canonical_address(row.channel, row.address)
            await suppressions.put(db, row.channel, address, reason, now)


async def _deactivate(db: Database, token: str, reason: str, now: datetime) -> None:
    statement = (
        sa.update(device)
        .where(device.c.token == token)
        .values(active=False, deactivated_reason=reason[:255], updated_at=now)
    )
    async with db.engine.begin() as conn:
        await conn.execute(statement)
