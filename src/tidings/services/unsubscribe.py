"""One-click unsubscribe (RFC 8058): what a valid link switches off, and its record."""

from __future__ import annotations

import uuid

from tidings.clock import utcnow
from tidings.policy.unsubscribe import Unsubscribe
from tidings.store import engagement, preferences, suppressions
from tidings.store.engine import Database
from tidings.store.suppressions import canonical_address


async def switch_off(db: Database, wanted: Unsubscribe) -> None:
    """Switch the category off on that channel for the user the link names, or suppress
    the bare address it names."""
    if wanted.user_id is not None:
        await preferences.switch(
            db, wanted.user_id, wanted.category, wanted.channel, False, utcnow()
        )
    elif wanted.address is not None:
        address = canonical_address(wanted.channel, wanted.address)
        await suppressions.put(db, wanted.channel, address, "unsubscribe", utcnow())


async def record(db: Database, delivery_id: uuid.UUID, wanted: Unsubscribe) -> None:
    """``unsubscribed`` in the delivery's history, once however often the link is used."""
    detail = {"category": wanted.category, "channel": wanted.channel}
    await engagement.record_once(db, delivery_id, engagement.UNSUBSCRIBED, detail, utcnow())
