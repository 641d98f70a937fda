"""The suppression list, by (channel, address) as the caller wrote the address."""

from __future__ import annotations

from tidings.clock import utcnow
from tidings.store import suppressions
from tidings.store.engine import Database
from tidings.store.suppressions import Suppression, canonical_address

__all__ = ["Suppression", "canonical_address", "get", "lift", "suppress"]


async def suppress(db: Database, channel: str, address: str, reason: str) -> Suppression:
    """Never send to this address on this channel again (a new reason replaces the old)."""
    canonical = canonical_address(channel, address)
    await suppressions.put(db, channel, canonical, reason, utcnow())
    stored = await suppressions.get(db, channel, canonical)
    assert stored is not None  # just written
    return stored


async def get(db: Database, channel: str, address: str) -> Suppression | None:
    return await suppressions.get(db, channel, canonical_address(channel, address))


async def lift(db: Database, channel: str, address: str) -> bool:
    """Allow sending to this address again; False when it was not suppressed."""
    return await suppressions.delete(db, channel, canonical_address(channel, address))
