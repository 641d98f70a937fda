"""Whether a provider event's delivery is ready for it: its send's outcome written.

A provider may report on a message before the dispatcher has written the outcome of the
send that made it (the outcome writer flushes in batches): the delivery is still SENDING,
its provider message id not yet stored. An event applied then would find nothing, or be
refused the status move. A webhook whose provider retries (SNS retries 5xx) asks here
first and answers "later" instead.
"""

from __future__ import annotations

import sqlalchemy as sa

from tidings.states import Status
from tidings.store.engine import Database
from tidings.store.schema import delivery
from tidings.store.tracking import DeliveryKey

_IN_PROGRESS = (Status.PENDING.value, Status.QUEUED.value, Status.SENDING.value)


async def in_progress(db: Database, provider: str, channel: str, key: DeliveryKey) -> bool | None:
    """True while the delivery ``key`` names is still being sent, False once its outcome
    is written; None when no delivery of ``provider`` on ``channel`` matches."""
    matches = []
    if key.delivery_id is not None:
        matches.append(delivery.c.id == key.delivery_id)
    if key.provider_msg_id:
        matches.append(
            sa.and_(
                delivery.c.provider == provider,
                delivery.c.provider_msg_id == key.provider_msg_id,
            )
        )
    if not matches:
        return None
    query = sa.select(delivery.c.status).where(sa.or_(*matches), delivery.c.channel == channel)
    async with db.engine.connect() as conn:
        statuses = list((await conn.execute(query.limit(2))).scalars())
    if not statuses:
        return None
    return any(status in _IN_PROGRESS for status in statuses)
