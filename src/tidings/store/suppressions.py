"""The suppression list: (channel, address) pairs that nothing is ever sent to, its SQL and
the canonical form of the addresses in it."""

from __future__ import annotations

import hashlib
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa

from tidings.store.dialects import Variants
from tidings.store.engine import Database
from tidings.store.schema import suppression
from tidings.store.upsert import upsert

Pair = tuple[str, str]  # (channel, canonical address)
ERASED = "erased:sha256:"


@dataclass(frozen=True)
class Suppression:
    channel: str
    address: str  # canonical
    reason: str
    created_at: datetime


def canonical_address(channel: str, address: str) -> str:
    """The form an address is suppressed and looked up in.

    Email addresses compare without case: a bounce for ``Ana@Example.com`` must stop mail to
    ``ana@example.com``. Phone numbers (E.164) and device tokens are compared as they are.
    """
    return address.lower() if channel == "email" else address


def erased_address(channel: str, address: str) -> str:
    """What an erased user's address is replaced by (store/erasure.py): one-way, the same
    for the same address, so a suppression kept under it still matches (``suppressed``)."""
    digest = hashlib.sha256(canonical_address(channel, address).encode()).hexdigest()
    return f"{ERASED}{digest}"


async def put(db: Database, channel: str, address: str, reason: str, now: datetime) -> None:
    """Suppress (or re-suppress with a new reason) one address."""
    row = {"channel": channel, "address": address, "reason": reason, "created_at": now}
    await upsert(db, suppression, ["channel", "address"], row)


async def get(db: Database, channel: str, address: str) -> Suppression | None:
    query = sa.select(suppression).where(
        suppression.c.channel == channel, suppression.c.address == address
    )
    async with db.engine.connect() as conn:
        row = (await conn.execute(query)).first()
    if row is None:
        return None
    return Suppression(row.channel, row.address, row.reason, row.created_at)


async def delete(db: Database, channel: str, address: str) -> bool:
    statement = sa.delete(suppression).where(
        suppression.c.channel == channel, suppression.c.address == address
    )
    async with db.engine.begin() as conn:
        return (await conn.execute(statement)).rowcount > 0


# Asked for every batch accepted and every batch claimed: plain SQL with two arrays, where
# SQLAlchemy would render an IN list of a thousand pairs each time.
_PG_SUPPRESSED = """
SELECT channel, address FROM suppression
WHERE (channel, address) IN (SELECT * FROM unnest($1::text[], $2::text[]))
"""


async def suppressed(db: Database, pairs: Collection[Pair]) -> set[Pair]:
    """Which of ``pairs`` are on the list (one query), as themselves or, for an erased
    user's address, as its hash."""
    if not pairs:
        return set()
    hashed = {
        (channel, erased_address(channel, address)): (channel, address)
        for channel, address in pairs
    }
    found = await _suppressed.of(db)(db, {*pairs, *hashed})
    return {pair for pair in found if pair in pairs} | {hashed[p] for p in found if p in hashed}


async def _suppressed_postgres(db: Database, pairs: Collection[Pair]) -> set[Pair]:
    channels, addresses = zip(*pairs, strict=True)
    async with db.asyncpg() as conn:
        rows = await conn.fetch(_PG_SUPPRESSED, channels, addresses)
    return {(row[0], row[1]) for row in rows}


async def _suppressed_sqlite(db: Database, pairs: Collection[Pair]) -> set[Pair]:
    query = sa.select(suppression.c.channel, suppression.c.address).where(
        sa.tuple_(suppression.c.channel, suppression.c.address).in_(list(pairs))
    )
    async with db.engine.connect() as conn:
        return {(row.channel, row.address) for row in await conn.execute(query)}


_suppressed = Variants(postgres=_suppressed_postgres, sqlite=_suppressed_sqlite)
