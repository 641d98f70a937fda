"""What a permanent provider error means beyond its delivery: a push token that is gone is
deactivated, and an address that bounced hard (or asked to stop) is suppressed.

Applied by ``store.outcomes.write_outcomes`` in the transaction of the batch's outcomes, so
that a delivery is never FAILED without its effect, nor the effect kept without the outcome.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.states import Effect
from tidings.store.engine import Database
from tidings.store.schema import delivery, device, suppression
from tidings.store.suppressions import canonical_address
from tidings.store.upsert import insert

if TYPE_CHECKING:
    from tidings.store.outcomes import Outcome

REASON_LENGTH = 255  # the columns' width


async def apply_effects(
    db: Database, conn: AsyncConnection, outcomes: Sequence[Outcome], now: datetime
) -> None:
    """Idempotent, so a batch written again after a failure does no harm."""
    wanted = {o.delivery_id: o for o in outcomes if o.effect is not None}
    if not wanted:
        return
    query = sa.select(delivery.c.id, delivery.c.channel, delivery.c.address).where(
        delivery.c.id.in_(list(wanted))
    )
    deactivate, deactivate_unless_newer, suppress = [], [], []
    for row in (await conn.execute(query)).all():
        outcome = wanted[row.id]
        reason = (outcome.effect_reason or outcome.effect or "provider")[:REASON_LENGTH]
        if outcome.effect is Effect.DEACTIVATE_DEVICE:
            values = {"b_token": row.address, "b_reason": reason}
            if outcome.effect_at is None:
                deactivate.append(values)
            else:
                deactivate_unless_newer.append(values | {"b_since": outcome.effect_at})
        elif outcome.effect is Effect.SUPPRESS_ADDRESS:
            address = canonical_address(row.channel, row.address)
            suppress.append(
                {"channel": row.channel, "address": address, "reason": reason, "created_at": now}
            )
    if deactivate:
        await conn.execute(_deactivate.values(updated_at=now), deactivate)
    if deactivate_unless_newer:
        await conn.execute(_deactivate_unless_newer.values(updated_at=now), deactivate_unless_newer)
    for values in suppress:  # rare, and one address may appear twice in a batch
        await conn.execute(_suppress(db, values))


_deactivate = (
    sa.update(device)
    .where(device.c.token == sa.bindparam("b_token"))
    .values(active=False, deactivated_reason=sa.bindparam("b_reason"))
)
# With the time the provider last confirmed the token dead (APNs' 410 timestamp): a device
# registered (or registered again) after it keeps its token. Registering is what sets
# updated_at (store/users.put_device); a deactivation does too, and then changes nothing.
_deactivate_unless_newer = _deactivate.where(
    device.c.updated_at <= sa.bindparam("b_since", type_=device.c.updated_at.type)
)


def _suppress(db: Database, values: dict[str, Any]) -> Any:
    """Suppress (or re-suppress with a new reason) one address."""
    statement = insert(db, suppression).values(values)
    return statement.on_conflict_do_update(
        index_elements=["channel", "address"], set_={"reason": statement.excluded.reason}
    )
