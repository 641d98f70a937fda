"""Replies to an SMS number (tracking/inbound.py): recorded, and acted on, once per message
id, in one transaction; listed newest first."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.ids import new_id
from tidings.priorities import Channel
from tidings.store.engine import Database
from tidings.store.schema import inbound_reply, suppression
from tidings.store.upsert import insert

SMS = Channel.SMS.value


@dataclass(frozen=True)
class Reply:
    account: str
    message_id: str | None
    sender: str
    keyword: str | None


@dataclass(frozen=True)
class Received:
    """A reply as listed: what it asked and what it did (``suppressed``, ``lifted``,
    ``none``)."""

    account: str
    sender: str
    keyword: str | None
    action: Literal["suppressed", "lifted", "none"]
    at: datetime


@dataclass(frozen=True)
class Wanted:
    """What a reply asks of its sender's SMS suppression: to suppress it (with this
    reason), or to lift it when its reason is one of ``lift``; by default nothing."""

    suppress: str | None = None
    lift: frozenset[str] = frozenset()


async def act(db: Database, reply: Reply, wanted: Wanted, now: datetime) -> str | None:
    """Record ``reply`` and do what it asks: what was done (``suppressed``, ``lifted``,
    ``none``), or None when its message id was recorded already. One transaction, the
    record first: a retried or replayed webhook (a STOP sent again after a START), even
    one racing the first, acts once."""
    async with db.engine.begin() as conn:
        reply_id = await _first(db, conn, reply, now)
        if reply_id is None:
            return None
        action = await _suppression(db, conn, reply.sender, wanted, now)
        if action != "none":
            statement = sa.update(inbound_reply).where(inbound_reply.c.id == reply_id)
            await conn.execute(statement.values(action=action))
    return action


async def _first(
    db: Database, conn: AsyncConnection, reply: Reply, now: datetime
) -> uuid.UUID | None:
    """The new record's id; None when one with its message id exists (PostgreSQL: one
    being written waits for that one to commit)."""
    row = {
        "id": new_id(),
        "account": reply.account,
        "message_id": reply.message_id or None,
        "sender": reply.sender[:32],
        "keyword": reply.keyword,
        "action": "none",
        "at": now,
    }
    statement = (
        insert(db, inbound_reply).values(row).on_conflict_do_nothing().returning(inbound_reply.c.id)
    )
    found: uuid.UUID | None = (await conn.execute(statement)).scalar()
    return found


async def _suppression(
    db: Database, conn: AsyncConnection, sender: str, wanted: Wanted, now: datetime
) -> str:
    if wanted.suppress is not None:
        row = {"channel": SMS, "address": sender, "reason": wanted.suppress, "created_at": now}
        statement = insert(db, suppression).values(row)
        statement = statement.on_conflict_do_update(
            index_elements=["channel", "address"], set_={"reason": statement.excluded.reason}
        )
        await conn.execute(statement)
        return "suppressed"
    if wanted.lift:
        lifted = await conn.execute(
            sa.delete(suppression).where(
                suppression.c.channel == SMS,
                suppression.c.address == sender,
                suppression.c.reason.in_(sorted(wanted.lift)),
            )
        )
        return "lifted" if lifted.rowcount else "none"
    return "none"


async def newest(db: Database, limit: int, keyword: str | None = None) -> list[Received]:
    query = sa.select(inbound_reply).order_by(inbound_reply.c.at.desc(), inbound_reply.c.id.desc())
    if keyword is not None:
        query = query.where(inbound_reply.c.keyword == keyword)
    async with db.engine.connect() as conn:
        rows = await conn.execute(query.limit(limit))
        return [Received(r.account, r.sender, r.keyword, r.action, r.at) for r in rows]
