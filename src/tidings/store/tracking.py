"""Applying provider events (webhooks) to deliveries: one transaction per webhook call.

Set-based: a SendGrid batch of a thousand events is a handful of statements. A provider's
event id is inserted into ``webhook_seen`` first; an event whose id was already there (a
retried webhook, or one racing it) is skipped. Statuses only move forward along the state
machine, so callbacks arriving out of order never undo what a later one said.

An account's webhook touches only its own deliveries: an event moves a delivery only when
the delivery records that account (``delivery.provider``, its last attempt's) or an attempt
of it named that account (the ``provider`` of a dispatcher's history event: a retry, a
failure). A request signed with one account's credentials, naming another's delivery by
id, is ignored: counted, logged, nothing written, nothing suppressed. An event about a
delivery still being sent, whose outcome (naming its account) is not written yet, waits
whole in ``early_status`` and is written or dropped once it is (``settle_early``).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.ids import new_id
from tidings.states import TRANSITIONS, FailureKind, Status
from tidings.store.engine import Database
from tidings.store.schema import (
    delivery,
    delivery_event,
    early_status,
    suppression,
    webhook_seen,
)
from tidings.store.suppressions import canonical_address
from tidings.store.upsert import insert

log = logging.getLogger(__name__)
# Providers retry a webhook for up to a day (SendGrid: 24 h); ids are kept a while longer.
SEEN_RETENTION = timedelta(days=3)
# Statuses applied in this order, so that "delivered" then "bounced" in one batch ends BOUNCED.
_FORWARD = (Status.DELIVERED, Status.BOUNCED)
# The longest error text kept on a delivery.
_MAX_ERROR = 1000
_IN_PROGRESS = (Status.PENDING.value, Status.QUEUED.value, Status.SENDING.value)
# A status waits this long for its send's outcome (a lease is far shorter).
_EARLY_FOR = timedelta(days=1)


@dataclass(frozen=True)
class DeliveryKey:
    """Our delivery id when the provider echoes it, else the provider's message id."""

    delivery_id: uuid.UUID | None
    provider_msg_id: str | None


@dataclass(frozen=True)
class Failure:
    """Why a provider's event failed a delivery it had accepted."""

    kind: FailureKind
    error: str


@dataclass(frozen=True)
class Tracked:
    """One provider event, as ``tidings.tracking`` maps it: what ``apply`` writes."""

    key: DeliveryKey
    kind: str  # the delivery_event kind
    at: datetime
    event_id: str | None = None  # the provider's id of this event, for dedupe
    status: Status | None = None  # where the delivery moves (if it can)
    suppress: str | None = None  # suppression reason for the delivery's address
    detail: dict[str, Any] = field(default_factory=dict)
    failure: Failure | None = None  # with status FAILED


@dataclass(frozen=True)
class Applied:
    """What one webhook call did (the response body says it, tests check it)."""

    applied: int  # matched to a delivery and recorded (or waiting for its send's outcome)
    duplicates: int  # already seen: skipped
    unmatched: int  # no delivery of ours: ignored
    ignored: int = 0  # about a delivery not sent through this account: nothing done


@dataclass(frozen=True)
class _Target:
    id: uuid.UUID
    channel: str
    address: str
    status: str
    provider: str | None  # the account the delivery records


async def apply(
    db: Database,
    provider: str,
    channel: str,
    items: Sequence[Tracked],
    now: datetime,
    accounts: Collection[str] | None = None,
) -> Applied:
    """Record ``items`` (events that ``provider`` reported on ``channel``) in one
    transaction: each about a delivery sent or attempted through one of ``accounts`` (by
    default ``provider``, the account whose credentials the request carried); the others
    are ignored, and logged once."""
    through = frozenset(accounts if accounts is not None else (provider,))
    async with db.engine.begin() as conn:
        fresh = await _unseen(db, conn, provider, items, now)
        targets = await _resolve(conn, through, channel, fresh)
        bound = await _bound(conn, through, targets.values())
        matched, waiting = [], []
        for index, item in enumerate(fresh):
            target = targets.get(index)
            if target is not None and target.id in bound:
                matched.append((item, target))
            elif target is not None and target.status in _IN_PROGRESS:
                waiting.append((item, target))  # its account is not recorded yet
        if matched:
            await _record(db, conn, matched, now)
        if waiting:
            await _wait(conn, waiting, through, now)
    ignored = len(targets) - len(matched) - len(waiting)
    if ignored:
        log.warning(
            "%d %s event(s) from %s name deliveries not sent through it: ignored",
            ignored,
            channel,
            provider,
        )
    return Applied(
        len(matched) + len(waiting), len(items) - len(fresh), len(fresh) - len(targets), ignored
    )


async def _unseen(
    db: Database, conn: AsyncConnection, provider: str, items: Sequence[Tracked], now: datetime
) -> list[Tracked]:
    """``items`` without the events whose id is already in ``webhook_seen`` (or repeated)."""
    await conn.execute(sa.delete(webhook_seen).where(webhook_seen.c.at < now - SEEN_RETENTION))
    ids = list(dict.fromkeys(item.event_id for item in items if item.event_id))
    new: set[str] = set()
    if ids:
        rows = [{"provider": provider, "event_id": event_id, "at": now} for event_id in ids]
        statement = (
            insert(db, webhook_seen)
            .values(rows)
            .on_conflict_do_nothing()
            .returning(webhook_seen.c.event_id)
        )
        new = set((await conn.execute(statement)).scalars())
    fresh = []
    for item in items:
        if item.event_id is None:
            fresh.append(item)
        elif item.event_id in new:
            new.discard(item.event_id)  # the first of repeats within the batch only
            fresh.append(item)
    return fresh


async def _resolve(
    conn: AsyncConnection, accounts: frozenset[str], channel: str, items: Sequence[Tracked]
) -> dict[int, _Target]:
    """Index in ``items`` -> its delivery: by our delivery id, else by the provider's id
    (which only the accounts' deliveries are searched for)."""
    columns = (
        delivery.c.id,
        delivery.c.channel,
        delivery.c.address,
        delivery.c.status,
        delivery.c.provider,
        delivery.c.provider_msg_id,
    )
    ids = {item.key.delivery_id for item in items if item.key.delivery_id}
    msg_ids = {item.key.provider_msg_id for item in items if item.key.provider_msg_id}
    by_id: dict[uuid.UUID, _Target] = {}
    by_msg: dict[str, _Target] = {}
    if ids:
        query = sa.select(*columns).where(delivery.c.id.in_(ids), delivery.c.channel == channel)
        by_id = {row.id: _target(row) for row in await conn.execute(query)}
    if msg_ids:
        query = sa.select(*columns).where(
            delivery.c.provider.in_(accounts),
            delivery.c.provider_msg_id.in_(msg_ids),
            delivery.c.channel == channel,
        )
        by_msg = {row.provider_msg_id: _target(row) for row in await conn.execute(query)}
    resolved = {}
    for index, item in enumerate(items):
        target = by_id.get(item.key.delivery_id) if item.key.delivery_id else None
        if (target is None or target.provider not in accounts) and item.key.provider_msg_id:
            target = by_msg.get(item.key.provider_msg_id, target)
        if target is not None:
            resolved[index] = target
    return resolved


def _target(row: Any) -> _Target:
    return _Target(row.id, row.channel, row.address, row.status, row.provider)


async def _bound(
    conn: AsyncConnection, accounts: frozenset[str], targets: Iterable[_Target]
) -> set[uuid.UUID]:
    """The deliveries among ``targets`` sent or attempted through one of ``accounts``."""
    bound: set[uuid.UUID] = set()
    others: set[uuid.UUID] = set()
    for target in targets:
        (bound if target.provider in accounts else others).add(target.id)
    if others:
        bound |= {delivery_id for delivery_id, _ in await _attempts(conn, others, accounts)}
    return bound


async def _attempts(
    conn: AsyncConnection, ids: Collection[uuid.UUID], accounts: Collection[str]
) -> set[tuple[uuid.UUID, str]]:
    """(delivery, account) for each earlier attempt of ``ids`` through one of ``accounts``:
    the dispatcher's history events (a retry, a failure, a hold) name their account as
    ``provider``; no provider event's detail has that key."""
    account = delivery_event.c.detail["provider"].as_string()
    query = (
        sa.select(delivery_event.c.delivery_id, account.label("account"))
        .where(delivery_event.c.delivery_id.in_(ids), account.in_(accounts))
        .distinct()
    )
    return {(row.delivery_id, row.account) for row in await conn.execute(query)}


async def _record(
    db: Database,
    conn: AsyncConnection,
    matched: Sequence[tuple[Tracked, _Target]],
    now: datetime,
) -> None:
    events = [
        {"id": new_id(), "delivery_id": t.id, "kind": i.kind, "at": i.at, "detail": i.detail}
        for i, t in matched
    ]
    await conn.execute(sa.insert(delivery_event), events)
    moves = [(t.id, i.status, i.failure) for i, t in matched if i.status is not None]
    await _keep_early(conn, moves, await _apply_moves(conn, moves, now), now)
    await _suppress(db, conn, [(t, i.suppress) for i, t in matched if i.suppress], now)


Move = tuple[uuid.UUID, Status | None, Failure | None]


async def _apply_moves(
    conn: AsyncConnection, moves: Sequence[Move], now: datetime
) -> set[uuid.UUID]:
    """Apply the status moves the state machine allows now; the deliveries moved."""
    moved: set[uuid.UUID] = set()
    for forward in _FORWARD:
        moved |= await _move(conn, {d for d, s, _ in moves if s == forward}, forward, now)
    for delivery_id, status, failure in moves:
        if status is Status.FAILED and failure is not None:
            if await _fail(conn, delivery_id, failure, now):
                moved.add(delivery_id)
    return moved


async def _keep_early(
    conn: AsyncConnection, moves: Sequence[Move], moved: set[uuid.UUID], now: datetime
) -> None:
    """The moves not applied wait for the reaper's round (``settle_early``), which applies
    those the state machine then allows and drops the rest. Every one waits, not only those
    whose delivery a second look finds still being sent: the send's outcome may commit
    between the move and that look (each statement sees what committed before it), and the
    move would be lost with the delivery SENT."""
    rows = [
        {
            "id": new_id(),
            "delivery_id": d,
            "status": s.value,
            "failure_kind": f.kind.value if f else None,
            "error": f.error[:_MAX_ERROR] if f else None,
            "at": now,
        }
        for d, s, f in moves
        if d not in moved and s is not None
    ]
    if rows:
        await conn.execute(sa.insert(early_status), rows)


async def _wait(
    conn: AsyncConnection,
    waiting: Sequence[tuple[Tracked, _Target]],
    accounts: frozenset[str],
    now: datetime,
) -> None:
    """Events about deliveries still being sent, whose account is not known yet: kept whole
    (nothing in the history, nothing suppressed) until ``settle_early`` knows it."""
    rows = [
        {
            "id": new_id(),
            "delivery_id": target.id,
            "status": item.status.value if item.status else None,
            "failure_kind": item.failure.kind.value if item.failure else None,
            "error": item.failure.error[:_MAX_ERROR] if item.failure else None,
            "at": now,
            "pending": {
                "accounts": sorted(accounts),
                "kind": item.kind,
                "at": item.at.isoformat(),
                "detail": item.detail,
                "suppress": item.suppress,
            },
        }
        for item, target in waiting
    ]
    await conn.execute(sa.insert(early_status), rows)


async def settle_early(db: Database, now: datetime) -> int:
    """Apply the statuses that outran their send, now that it is recorded; the applied.
    Those whose delivery ended otherwise, or waited over a day, are dropped, and so are the
    waiting events whose delivery went out through another account."""
    query = (
        sa.select(
            early_status,
            delivery.c.status.label("current"),
            delivery.c.provider.label("account"),
            delivery.c.channel,
            delivery.c.address,
        )
        .join(delivery, delivery.c.id == early_status.c.delivery_id, isouter=True)
        # Only rows with something to do: however many still wait (events naming deliveries
        # deferred for hours, forged or not), they never hide the ready ones from a round.
        .where(
            sa.or_(
                delivery.c.status.is_(None),
                delivery.c.status.not_in(_IN_PROGRESS),
                early_status.c.at < now - _EARLY_FOR,
            )
        )
    )
    async with db.engine.begin() as conn:
        rows = (await conn.execute(query.limit(1000))).all()
        ready = [r for r in rows if r.current not in _IN_PROGRESS]
        stale = [r for r in rows if r.current in _IN_PROGRESS and now - r.at > _EARLY_FOR]
        trusted = await _trusted(conn, ready)
        await _record_pending(db, conn, [r for r in trusted if r.pending is not None], now)
        moves = [(r.delivery_id, Status(r.status), _failure(r)) for r in trusted if r.status]
        moved = await _apply_moves(conn, moves, now) if moves else set()
        done = [r.id for r in (*ready, *stale)]
        if done:
            await conn.execute(sa.delete(early_status).where(early_status.c.id.in_(done)))
    if len(trusted) < len(ready):
        log.warning(
            "%d waiting provider event(s) named deliveries not sent through their account: dropped",
            len(ready) - len(trusted),
        )
    return len(moved)


async def _trusted(conn: AsyncConnection, rows: Sequence[Any]) -> list[Any]:
    """The ``rows`` to apply: early statuses of bound events, and waiting events whose
    delivery went out (or was attempted) through one of the accounts they came from."""
    unsure = [r for r in rows if r.pending is not None and r.account not in r.pending["accounts"]]
    attempted: set[tuple[uuid.UUID, str]] = set()
    if unsure:
        ids = {r.delivery_id for r in unsure}
        accounts = {a for r in unsure for a in r.pending["accounts"]}
        attempted = await _attempts(conn, ids, accounts)
    return [r for r in rows if r.pending is None or _took(r, attempted)]


def _took(row: Any, attempted: set[tuple[uuid.UUID, str]]) -> bool:
    """Whether the waiting event ``row`` is its delivery's account's (a delivery gone since,
    to retention, takes nothing)."""
    accounts = row.pending["accounts"]
    if row.current is None:
        return False
    return row.account in accounts or any((row.delivery_id, a) in attempted for a in accounts)


async def _record_pending(
    db: Database, conn: AsyncConnection, rows: Sequence[Any], now: datetime
) -> None:
    """Write the history and suppressions of waiting events found to be the account's."""
    if not rows:
        return
    events = [
        {
            "id": new_id(),
            "delivery_id": r.delivery_id,
            "kind": r.pending["kind"],
            "at": datetime.fromisoformat(r.pending["at"]),
            "detail": r.pending["detail"],
        }
        for r in rows
    ]
    await conn.execute(sa.insert(delivery_event), events)
    wanted = [
        (_Target(r.delivery_id, r.channel, r.address, r.current, r.account), r.pending["suppress"])
        for r in rows
        if r.pending["suppress"]
    ]
    await _suppress(db, conn, wanted, now)


def _failure(row: Any) -> Failure | None:
    if row.failure_kind is None:
        return None
    return Failure(FailureKind(row.failure_kind), row.error or "")


async def _move(
    conn: AsyncConnection, ids: set[uuid.UUID], status: Status, now: datetime
) -> set[uuid.UUID]:
    """Move ``ids`` to ``status`` where the state machine allows it; those moved."""
    if not ids:
        return set()
    sources = [s.value for s, targets in TRANSITIONS.items() if status in targets]
    statement = (
        sa.update(delivery)
        .where(delivery.c.id.in_(ids), delivery.c.status.in_(sources))
        .values(status=status.value, updated_at=now)
        .returning(delivery.c.id)
    )
    return set((await conn.execute(statement)).scalars())


async def _fail(
    conn: AsyncConnection, delivery_id: uuid.UUID, failure: Failure, now: datetime
) -> bool:
    """A delivery the provider accepted and then gave up on: FAILED, into the dead-letter
    queue when its kind is one (rare: one statement each). Only from SENT: a delivered or
    bounced one stays, and one still SENDING is its dispatcher's to finish."""
    statement = (
        sa.update(delivery)
        .where(delivery.c.id == delivery_id, delivery.c.status == Status.SENT.value)
        .values(
            status=Status.FAILED.value,
            failure_kind=failure.kind.value,
            last_error=failure.error[:_MAX_ERROR],
            updated_at=now,
        )
    )
    return bool((await conn.execute(statement)).rowcount)


async def _suppress(
    db: Database, conn: AsyncConnection, wanted: Sequence[tuple[_Target, str]], now: datetime
) -> None:
    """Suppress the delivered-to addresses (a later reason replaces an earlier one)."""
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for target, reason in wanted:
        address = canonical_address(target.channel, target.address)
        rows[(target.channel, address)] = {
            "channel": target.channel,
            "address": address,
            "reason": reason,
            "created_at": now,
        }
    if not rows:
        return
    statement = insert(db, suppression).values(list(rows.values()))
    statement = statement.on_conflict_do_update(
        index_elements=["channel", "address"], set_={"reason": statement.excluded.reason}
    )
    await conn.execute(statement)
