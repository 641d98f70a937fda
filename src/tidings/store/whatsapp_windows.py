"""WhatsApp's 24-hour customer service window: when each number last wrote to each
account (``whatsapp_window``). Written by the inbound webhooks (Meta's ``messages``,
Twilio's incoming messages), read by the send-time checks for the whatsapp deliveries of a
batch (one query), so that the adapters can refuse free text outside the window before
calling the provider (docs/providers.md, WhatsApp)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.store.engine import Database
from tidings.store.schema import whatsapp_window
from tidings.store.upsert import insert

# One inbound message: the account it reached, the sender's E.164 number, when it was sent.
Inbound = tuple[str, str, datetime]


async def record(db: Database, inbound: Sequence[Inbound]) -> int:
    """Keep each number's newest inbound time per account (an older or repeated webhook
    changes nothing); how many rows moved."""
    newest: dict[tuple[str, str], datetime] = {}
    for account, number, at in inbound:
        key = (account, number)
        newest[key] = max(at, newest.get(key, at))
    if not newest:
        return 0
    rows = [{"account": a, "number": n, "last_inbound_at": at} for (a, n), at in newest.items()]
    statement = insert(db, whatsapp_window).values(rows)
    statement = statement.on_conflict_do_update(
        index_elements=["account", "number"],
        set_={"last_inbound_at": statement.excluded.last_inbound_at},
        where=whatsapp_window.c.last_inbound_at < statement.excluded.last_inbound_at,
    )
    async with db.engine.begin() as conn:
        result = await conn.execute(statement)
    return int(result.rowcount)


async def last_inbound(db: Database, numbers: Collection[str]) -> dict[str, dict[str, datetime]]:
    """For each of ``numbers`` that ever wrote in: the account -> its last inbound time."""
    if not numbers:
        return {}
    query = sa.select(
        whatsapp_window.c.number, whatsapp_window.c.account, whatsapp_window.c.last_inbound_at
    ).where(whatsapp_window.c.number.in_(sorted(set(numbers))))
    found: dict[str, dict[str, datetime]] = {}
    async with db.engine.connect() as conn:
        for number, account, at in await conn.execute(query):
            found.setdefault(number, {})[account] = at
    return found


async def forget(conn: AsyncConnection, numbers: Collection[str]) -> None:
    """An erased user's numbers (store/erasure.py): their windows go with them."""
    if numbers:
        await conn.execute(sa.delete(whatsapp_window).where(whatsapp_window.c.number.in_(numbers)))
