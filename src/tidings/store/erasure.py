"""Erasing a user (GDPR/LGPD, DELETE /v1/users/{id}): what is theirs is deleted, and their
addresses where tidings keeps its history of what it sent are replaced by a one-way hash.

Deleted: the profile, devices, preferences, topics, frequency counters, inbox messages, and
the SMS replies from their phone (a log; a STOP's effect is the suppression). Replaced by
``erased_address`` (``erased:`` and the SHA-256 of the canonical address): the address of
every delivery to one of their addresses or of one of their notifications (webhook URLs
aside: an endpoint is nobody's), those addresses inside the deliveries' errors and history
details and the notifications' data, and suppressed addresses, which
``suppressions.suppressed`` also looks up by hash, so a suppressed address stays suppressed.
One transaction: all of it or none.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.store.engine import Database
from tidings.store.schema import (
    delivery,
    delivery_event,
    device,
    frequency_count,
    inbound_reply,
    inbox_message,
    notification,
    preference,
    suppression,
    topic_subscription,
    user_profile,
)
from tidings.store.suppressions import canonical_address, erased_address
from tidings.store.whatsapp_windows import forget as forget_windows

# The profile's address fields and the channel each is an address of.
_CHAT_COLUMNS = ("slack", "discord", "teams", "telegram", "whatsapp")
_PROFILE_ADDRESSES = {"email": "email", "phone": "sms"} | {
    name: name for name in _CHAT_COLUMNS if name in user_profile.c
}
_NOT_PERSONAL = frozenset({"webhook"})  # a producer's endpoint, shared by many users


@dataclass(frozen=True)
class Erased:
    """What an erasure removed (counts of rows) and replaced (rows changed)."""

    user_id: str
    profile: bool
    devices: int
    preferences: int
    topics: int
    frequency_counters: int
    inbox_messages: int
    replies: int
    deliveries: int
    events: int
    notifications: int
    suppressions: int


async def erase_user(db: Database, user_id: str) -> Erased:
    async with db.engine.begin() as conn:
        profile = (
            await conn.execute(sa.select(user_profile).where(user_profile.c.id == user_id))
        ).first()
        addresses = _profile_addresses(profile)
        tokens = await conn.execute(sa.select(device.c.token).where(device.c.user_id == user_id))
        addresses |= {("push", token) for (token,) in tokens}
        theirs = await _their_deliveries(conn, user_id)
        addresses |= {(c, a) for _, _, c, a in theirs if a and c not in _NOT_PERSONAL}
        touched = await _replace_in_deliveries(conn, addresses, {d for d, _, _, _ in theirs})
        texts = _replacements(addresses)
        events = await _scrub_json(
            conn,
            delivery_event,
            "detail",
            delivery_event.c.delivery_id,
            [d for d, _ in touched],
            texts,
        )
        notification_ids = {n for _, n in touched} | {n for _, n, _, _ in theirs}
        notifications = await _scrub_notifications(conn, notification_ids, texts)
        suppressions = await _hash_suppressions(conn, addresses)
        phones = [a for c, a in addresses if c == "sms"]
        await forget_windows(conn, [a for c, a in addresses if c == "whatsapp"])
        return Erased(
            user_id=user_id,
            profile=await _delete(conn, user_profile.c.id, user_id) > 0,
            devices=await _delete(conn, device.c.user_id, user_id),
            preferences=await _delete(conn, preference.c.user_id, user_id),
            topics=await _delete(conn, topic_subscription.c.user_id, user_id),
            frequency_counters=await _delete(conn, frequency_count.c.user_id, user_id),
            inbox_messages=await _delete(conn, inbox_message.c.user_id, user_id),
            replies=await _delete_replies(conn, phones),
            deliveries=len(touched),
            events=events,
            notifications=notifications,
            suppressions=suppressions,
        )


def _profile_addresses(profile: sa.Row[Any] | None) -> set[tuple[str, str]]:
    if profile is None:
        return set()
    found = {(channel, profile._mapping[field]) for field, channel in _PROFILE_ADDRESSES.items()}
    return {(channel, address) for channel, address in found if address}


async def _their_deliveries(
    conn: AsyncConnection, user_id: str
) -> list[tuple[uuid.UUID, uuid.UUID, str, str]]:
    """(delivery id, notification id, channel, address) of the user's notifications."""
    query = (
        sa.select(delivery.c.id, delivery.c.notification_id, delivery.c.channel, delivery.c.address)
        .join(notification, notification.c.id == delivery.c.notification_id)
        .where(notification.c.user_id == user_id)
    )
    return [(r.id, r.notification_id, r.channel, r.address) for r in await conn.execute(query)]


async def _replace_in_deliveries(
    conn: AsyncConnection, addresses: set[tuple[str, str]], theirs: set[uuid.UUID]
) -> set[tuple[uuid.UUID, uuid.UUID]]:
    """Every delivery to one of ``addresses`` gets the hash as its address, and the hash in
    place of the address in its last error; (delivery id, notification id) of each."""
    touched: set[tuple[uuid.UUID, uuid.UUID]] = set()
    for channel, address in sorted(addresses):
        hashed = erased_address(channel, address)
        found = await conn.execute(
            sa.update(delivery)
            .where(delivery.c.channel == channel, delivery.c.address == address)
            .values(address=hashed)
            .returning(delivery.c.id, delivery.c.notification_id)
        )
        touched |= {(row.id, row.notification_id) for row in found}
    missed = theirs - {d for d, _ in touched}
    if missed:  # theirs, to no address of theirs (a webhook): the errors may still name one
        rows = await conn.execute(
            sa.select(delivery.c.id, delivery.c.notification_id).where(delivery.c.id.in_(missed))
        )
        touched |= {(row.id, row.notification_id) for row in rows}
    for channel, address in sorted(addresses):
        hashed = erased_address(channel, address)
        await conn.execute(
            sa.update(delivery)
            .where(
                delivery.c.id.in_([d for d, _ in touched]),
                delivery.c.last_error.contains(address, autoescape=True),
            )
            .values(last_error=sa.func.replace(delivery.c.last_error, address, hashed))
        )
    return touched


def _replacements(addresses: set[tuple[str, str]]) -> dict[str, str]:
    """Each address and its hash, the longest first (one may hold another)."""
    ordered = sorted(addresses, key=lambda pair: (-len(pair[1]), pair))
    return {address: erased_address(channel, address) for channel, address in ordered}


def _scrubbed(value: Any, texts: dict[str, str]) -> Any:
    """``value`` (JSON) with each of ``texts`` inside any string replaced by its hash."""
    if isinstance(value, str):
        for text, hashed in texts.items():
            if text in value:
                value = value.replace(text, hashed)
        return value
    if isinstance(value, list):
        return [_scrubbed(item, texts) for item in value]
    if isinstance(value, dict):
        return {_scrubbed(k, texts): _scrubbed(v, texts) for k, v in value.items()}
    return value


async def _scrub_json(
    conn: AsyncConnection,
    table: sa.Table,
    column: str,
    key: sa.Column[Any],
    ids: Iterable[Any],
    texts: dict[str, str],
) -> int:
    """Rewrite ``table.column`` (JSON) of the rows whose ``key`` is in ``ids`` where it
    holds one of ``texts``; how many rows changed."""
    changed = 0
    wanted = list(ids)
    for start in range(0, len(wanted), 500):
        rows = await conn.execute(
            sa.select(table).where(
                key.in_(wanted[start : start + 500]), table.c[column].is_not(None)
            )
        )
        for row in list(rows):
            value = row._mapping[column]
            clean = _scrubbed(value, texts)
            if clean != value:
                primary = [c == row._mapping[c.name] for c in table.primary_key.columns]
                await conn.execute(sa.update(table).where(*primary).values({column: clean}))
                changed += 1
    return changed


async def _scrub_notifications(
    conn: AsyncConnection, ids: set[uuid.UUID], texts: dict[str, str]
) -> int:
    data = await _scrub_json(conn, notification, "data", notification.c.id, ids, texts)
    email = await _scrub_json(conn, notification, "email", notification.c.id, ids, texts)
    return data + email


async def _hash_suppressions(conn: AsyncConnection, addresses: set[tuple[str, str]]) -> int:
    """Each suppressed address of theirs is kept suppressed by its hash alone."""
    moved = 0
    for channel, address in sorted(addresses):
        canonical = canonical_address(channel, address)
        row = (
            await conn.execute(
                sa.select(suppression).where(
                    suppression.c.channel == channel, suppression.c.address == canonical
                )
            )
        ).first()
        if row is None:
            continue
        hashed = erased_address(channel, address)
        await conn.execute(
            sa.delete(suppression).where(
                suppression.c.channel == channel, suppression.c.address.in_([canonical, hashed])
            )
        )
        values = {"channel": channel, "address": hashed, "reason": row.reason}
        await conn.execute(sa.insert(suppression).values({**values, "created_at": row.created_at}))
        moved += 1
    return moved


async def _delete(conn: AsyncConnection, column: sa.Column[Any], value: str) -> int:
    result = await conn.execute(sa.delete(column.table).where(column == value))
    return int(result.rowcount)


async def _delete_replies(conn: AsyncConnection, phones: list[str]) -> int:
    if not phones:
        return 0
    result = await conn.execute(sa.delete(inbound_reply).where(inbound_reply.c.sender.in_(phones)))
    return int(result.rowcount)
