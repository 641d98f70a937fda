"""Webhook endpoints of producers and the messages sent to them (docs/events.md, Webhooks).

Fan-out: an endpoint's new events are read from the event log after its cursor, and its
messages inserted, in the transaction that advances the cursor: an event reaches each
endpoint once, and a crash between the two leaves neither. Sending: a due message is
leased (a crashed sender's lease expires and the message is sent again: receivers
deduplicate by ``webhook-id``), and only the oldest message of a notification not yet
taken is due (by its event's place in the log), so each endpoint gets a notification's
events in order. A message that failed for good disables its endpoint, in the same
transaction, and keeps holding the later ones back; enabling the endpoint sends it again.
"""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.ids import new_id
from tidings.store import events
from tidings.store.engine import Database
from tidings.store.events import Cursor
from tidings.store.schema import event, webhook_endpoint, webhook_message

ACTIVE, DISABLED = "active", "disabled"
PENDING, SENT, FAILED = "PENDING", "SENT", "FAILED"
# Replaced secrets still valid, at most: each is one more signature on every message.
MAX_PREVIOUS_SECRETS = 10


class TooManyRotations(Exception):
    """The endpoint has MAX_PREVIOUS_SECRETS replaced secrets still valid."""


@dataclass(frozen=True)
class Endpoint:
    id: uuid.UUID
    namespace: str
    url: str
    events: tuple[str, ...]
    types: tuple[str, ...] | None
    secret: str
    previous: tuple[tuple[str, datetime], ...]  # replaced secrets and until when, newest first
    status: str
    disabled_reason: str | None
    created_at: datetime

    def secrets(self, now: datetime) -> list[str]:
        """What signs a message now: the secret, and every one it replaced that is still
        valid (for 24 h after its rotation)."""
        return [self.secret, *(secret for secret, until in self.previous if until > now)]


@dataclass(frozen=True)
class Message:
    id: uuid.UUID
    endpoint: Endpoint
    body: str
    attempts: int
    first_attempt_at: datetime


@dataclass(frozen=True)
class Attempted:
    """One message to an endpoint and how it went, as its attempts are listed."""

    id: uuid.UUID
    event_type: str
    status: str  # PENDING, SENT, FAILED
    attempts: int
    last_status: int | None
    last_error: str | None
    created_at: datetime
    sent_at: datetime | None
    next_attempt_at: datetime


def _endpoint(row: Any) -> Endpoint:
    return Endpoint(
        row["id"],
        row["namespace"],
        row["url"],
        tuple(row["events"]),
        tuple(row["types"]) if row["types"] is not None else None,
        row["secret"],
        tuple(
            (p["secret"], datetime.fromisoformat(p["until"])) for p in row["previous_secrets"] or ()
        ),
        row["status"],
        row["disabled_reason"],
        row["created_at"],
    )


async def create(
    db: Database,
    namespace: str,
    url: str,
    event_types: Sequence[str],
    types: Sequence[str] | None,
    secret: str,
    now: datetime,
) -> Endpoint:
    """A new endpoint; it gets the events that come after this moment."""
    async with db.engine.begin() as conn:
        newest = (
            await conn.execute(sa.select(sa.func.max(event.c.txid), sa.func.max(event.c.id)))
        ).one()
        row = {
            "id": new_id(),
            "namespace": namespace,
            "url": url,
            "events": list(event_types),
            "types": list(types) if types is not None else None,
            "secret": secret,
            "previous_secrets": None,
            "status": ACTIVE,
            "disabled_reason": None,
            "cursor_txid": newest[0] or 0,
            "cursor_id": newest[1] or 0,
            "created_at": now,
            "updated_at": now,
        }
        await conn.execute(sa.insert(webhook_endpoint).values(row))
    return _endpoint(row)


async def get(db: Database, namespace: str, endpoint_id: uuid.UUID) -> Endpoint | None:
    query = sa.select(webhook_endpoint).where(
        webhook_endpoint.c.id == endpoint_id, webhook_endpoint.c.namespace == namespace
    )
    async with db.engine.connect() as conn:
        row = (await conn.execute(query)).first()
    return None if row is None else _endpoint(row._mapping)


async def listed(db: Database, namespace: str) -> list[Endpoint]:
    query = (
        sa.select(webhook_endpoint)
        .where(webhook_endpoint.c.namespace == namespace)
        .order_by(webhook_endpoint.c.created_at)
    )
    async with db.engine.connect() as conn:
        return [_endpoint(row._mapping) for row in await conn.execute(query)]


async def delete(db: Database, namespace: str, endpoint_id: uuid.UUID) -> bool:
    async with db.engine.begin() as conn:
        gone = await conn.execute(
            sa.delete(webhook_endpoint).where(
                webhook_endpoint.c.id == endpoint_id, webhook_endpoint.c.namespace == namespace
            )
        )
        if not gone.rowcount:
            return False
        await conn.execute(
            sa.delete(webhook_message).where(webhook_message.c.endpoint_id == endpoint_id)
        )
    return True


async def update(
    db: Database, namespace: str, endpoint_id: uuid.UUID, values: dict[str, Any]
) -> Endpoint | None:
    statement = (
        sa.update(webhook_endpoint)
        .where(webhook_endpoint.c.id == endpoint_id, webhook_endpoint.c.namespace == namespace)
        .values(values)
    )
    async with db.engine.begin() as conn:
        if not (await conn.execute(statement)).rowcount:
            return None
    return await get(db, namespace, endpoint_id)


async def rotate(
    db: Database,
    namespace: str,
    endpoint_id: uuid.UUID,
    secret: str,
    now: datetime,
    overlap: timedelta,
) -> datetime | None:
    """Replace the secret by ``secret``: the replaced one stays valid for ``overlap`` (until
    when is returned), and so do those replaced before, until theirs. None: no such
    endpoint. TooManyRotations: MAX_PREVIOUS_SECRETS are valid already. One transaction,
    the row locked: two rotations at once both keep what they replaced."""
    query = sa.select(webhook_endpoint).where(
        webhook_endpoint.c.id == endpoint_id, webhook_endpoint.c.namespace == namespace
    )
    query = db.dialect.locked(query)
    async with db.engine.begin() as conn:
        row = (await conn.execute(query)).first()
        if row is None:
            return None
        found = _endpoint(row._mapping)
        kept = [(old, until) for old, until in found.previous if until > now]
        if len(kept) >= MAX_PREVIOUS_SECRETS:
            raise TooManyRotations(endpoint_id)
        until = now + overlap
        previous = [
            {"secret": old, "until": at.isoformat()} for old, at in [(found.secret, until), *kept]
        ]
        await conn.execute(
            sa.update(webhook_endpoint)
            .where(webhook_endpoint.c.id == endpoint_id)
            .values(secret=secret, previous_secrets=previous, updated_at=now)
        )
    return until


async def active_endpoints(db: Database) -> list[uuid.UUID]:
    """Every active endpoint, in a new order each time (the first served is no one's
    privilege)."""
    ids = sa.select(webhook_endpoint.c.id).where(webhook_endpoint.c.status == ACTIVE)
    async with db.engine.connect() as conn:
        found = [row.id for row in await conn.execute(ids)]
    random.shuffle(found)
    return found


async def fan_out(db: Database, endpoint_ids: list[uuid.UUID], limit: int, now: datetime) -> bool:
    """Give each endpoint its new events (up to ``limit`` each); whether any made messages
    or may have more to read at once."""
    busy = False
    for endpoint_id in endpoint_ids:
        busy = await _fan_out_one(db, endpoint_id, limit, now) or busy
    return busy


async def _fan_out_one(db: Database, endpoint_id: uuid.UUID, limit: int, now: datetime) -> bool:
    locked = sa.select(webhook_endpoint).where(
        webhook_endpoint.c.id == endpoint_id, webhook_endpoint.c.status == ACTIVE
    )
    # Another dispatcher fanning it out now: leave it to that one.
    locked = db.dialect.locked(locked, skip_locked=True)
    async with db.engine.begin() as conn:
        row = (await conn.execute(locked)).first()
        if row is None:
            return False
        found = row._mapping
        cursor = Cursor(found["cursor_txid"], found["cursor_id"])
        read = await events.read_page(
            conn, db, found["namespace"], cursor, found["events"], limit, found["types"]
        )
        new = read.events
        if new:
            await conn.execute(
                sa.insert(webhook_message), [_message_row(endpoint_id, e, now) for e in new]
            )
        if read.next is not None and read.next != cursor:
            await conn.execute(
                sa.update(webhook_endpoint)
                .where(webhook_endpoint.c.id == endpoint_id)
                .values(cursor_txid=read.next.txid, cursor_id=read.next.id)
            )
    return bool(new) or read.more


def _message_row(endpoint_id: uuid.UUID, found: events.Event, now: datetime) -> dict[str, Any]:
    order_key = found.notification_id or found.campaign_id or found.delivery_id
    body = json.dumps(events.payload(found), separators=(",", ":"), ensure_ascii=False)
    return {
        "id": new_id(),
        "endpoint_id": endpoint_id,
        "order_key": order_key or endpoint_id,
        "event_txid": found.cursor.txid,
        "event_id": found.cursor.id,
        "event_type": found.type,
        "body": body,
        "status": PENDING,
        "attempts": 0,
        "next_attempt_at": now,
        "lease_until": None,
        "first_attempt_at": None,
        "last_status": None,
        "last_error": None,
        "created_at": now,
        "sent_at": None,
    }


def _place(table: Any) -> Any:
    """A message's place among its notification's (ids break the tie of messages made
    before places were kept: all 0)."""
    return sa.tuple_(table.c.event_txid, table.c.event_id, table.c.id)


def _due(now: datetime, limit: int, endpoint_id: uuid.UUID | None) -> sa.Select[Any]:
    earlier = webhook_message.alias("earlier")
    # Not yet taken: PENDING, or FAILED (its endpoint disabled until enabled again).
    blocked = (
        sa.select(earlier.c.id)
        .where(
            earlier.c.endpoint_id == webhook_message.c.endpoint_id,
            earlier.c.order_key == webhook_message.c.order_key,
            earlier.c.status != SENT,
            _place(earlier) < _place(webhook_message),
        )
        .exists()
    )
    query = (
        sa.select(webhook_message.c.id)
        .join(webhook_endpoint, webhook_endpoint.c.id == webhook_message.c.endpoint_id)
        .where(
            webhook_message.c.status == PENDING,
            webhook_message.c.next_attempt_at <= now,
            sa.or_(webhook_message.c.lease_until.is_(None), webhook_message.c.lease_until < now),
            webhook_endpoint.c.status == ACTIVE,
            ~blocked,
        )
        .order_by(webhook_message.c.next_attempt_at)
        .limit(limit)
    )
    if endpoint_id is not None:
        query = query.where(webhook_message.c.endpoint_id == endpoint_id)
    return query


async def with_due(db: Database, now: datetime) -> set[uuid.UUID]:
    """The endpoints with a message due and not leased (one read of the due index), so that
    a round claims only for those, not once for every endpoint."""
    query = (
        sa.select(webhook_message.c.endpoint_id)
        .where(
            webhook_message.c.status == PENDING,
            webhook_message.c.next_attempt_at <= now,
            sa.or_(webhook_message.c.lease_until.is_(None), webhook_message.c.lease_until < now),
        )
        .distinct()
    )
    async with db.engine.connect() as conn:
        return {row.endpoint_id for row in await conn.execute(query)}


async def claim(
    db: Database,
    limit: int,
    now: datetime,
    lease: timedelta,
    endpoint_id: uuid.UUID | None = None,
) -> list[Message]:
    """Lease up to ``limit`` due messages (of one endpoint, if given), the oldest unsent of
    each notification only."""
    due = _due(now, limit, endpoint_id)
    due = db.dialect.locked(due, of=webhook_message, skip_locked=True)
    statement = (
        sa.update(webhook_message)
        .where(webhook_message.c.id.in_(due.scalar_subquery()))
        .values(
            lease_until=now + lease,
            attempts=webhook_message.c.attempts + 1,
            first_attempt_at=sa.func.coalesce(webhook_message.c.first_attempt_at, now),
        )
        .returning(
            webhook_message.c.id,
            webhook_message.c.endpoint_id,
            webhook_message.c.body,
            webhook_message.c.attempts,
            webhook_message.c.first_attempt_at,
        )
    )
    async with db.engine.begin() as conn:
        claimed = (await conn.execute(statement)).all()
        endpoints = await _endpoints(conn, {row.endpoint_id for row in claimed})
    return [
        Message(row.id, endpoints[row.endpoint_id], row.body, row.attempts, row.first_attempt_at)
        for row in sorted(claimed, key=lambda r: r.id)
        if row.endpoint_id in endpoints
    ]


async def _endpoints(conn: AsyncConnection, ids: set[uuid.UUID]) -> dict[uuid.UUID, Endpoint]:
    if not ids:
        return {}
    query = sa.select(webhook_endpoint).where(webhook_endpoint.c.id.in_(list(ids)))
    return {row.id: _endpoint(row._mapping) for row in await conn.execute(query)}


async def sent(db: Database, message_id: uuid.UUID, status: int, now: datetime) -> None:
    await _finish(
        db, message_id, {"status": SENT, "sent_at": now, "last_status": status, "last_error": None}
    )


async def retry(
    db: Database, message_id: uuid.UUID, status: int | None, error: str, at: datetime
) -> None:
    values = {"next_attempt_at": at, "last_status": status, "last_error": error[:1000]}
    await _finish(db, message_id, values)


async def give_up(
    db: Database, message: Message, status: int | None, error: str, now: datetime
) -> None:
    """The message failed for good; its endpoint is disabled, with the reason, in the same
    transaction (no other sender may take the notification's next message meanwhile)."""
    since = f"{message.first_attempt_at:%Y-%m-%d %H:%M} UTC"
    reason = f"{message.attempts} attempts failed since {since}; the last: {error}"[:1000]
    values = {"status": FAILED, "last_status": status, "last_error": error[:1000]}
    async with db.engine.begin() as conn:
        await conn.execute(_finished(message.id, values))
        await conn.execute(
            sa.update(webhook_endpoint)
            .where(webhook_endpoint.c.id == message.endpoint.id)
            .values(status=DISABLED, disabled_reason=reason, updated_at=now)
        )


async def enable(db: Database, namespace: str, endpoint_id: uuid.UUID, now: datetime) -> bool:
    """Send to the endpoint again: active, and every message it was not sent (the one that
    failed for good first, in its place) due now, with fresh retries (attempts and the
    give-up clock from zero). False: no such endpoint."""
    activate = (
        sa.update(webhook_endpoint)
        .where(webhook_endpoint.c.id == endpoint_id, webhook_endpoint.c.namespace == namespace)
        .values(status=ACTIVE, disabled_reason=None, updated_at=now)
    )
    again = (
        sa.update(webhook_message)
        .where(webhook_message.c.endpoint_id == endpoint_id, webhook_message.c.status != SENT)
        .values(status=PENDING, attempts=0, first_attempt_at=None, next_attempt_at=now)
    )
    async with db.engine.begin() as conn:
        if not (await conn.execute(activate)).rowcount:
            return False
        await conn.execute(again)
    return True


def _finished(message_id: uuid.UUID, values: dict[str, Any]) -> sa.Update:
    return (
        sa.update(webhook_message)
        .where(webhook_message.c.id == message_id)
        .values(lease_until=None, **values)
    )


async def _finish(db: Database, message_id: uuid.UUID, values: dict[str, Any]) -> None:
    async with db.engine.begin() as conn:
        await conn.execute(_finished(message_id, values))


_ATTEMPTED = tuple(Attempted.__dataclass_fields__)


async def attempts(db: Database, endpoint_id: uuid.UUID, limit: int) -> list[Attempted]:
    """The endpoint's newest messages, with how each went."""
    query = (
        sa.select(webhook_message)
        .where(webhook_message.c.endpoint_id == endpoint_id)
        .order_by(webhook_message.c.id.desc())
        .limit(limit)
    )
    async with db.engine.connect() as conn:
        return [
            Attempted(**{f: row._mapping[f] for f in _ATTEMPTED})
            for row in await conn.execute(query)
        ]
