"""User profiles and their push devices: whom the intake addresses, what templates say of them."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from tidings.store import audiences
from tidings.store.dialects import Variants
from tidings.store.engine import Database
from tidings.store.schema import device, user_profile
from tidings.store.upsert import upsert


@dataclass(frozen=True)
class UserProfile:
    id: str
    email: str | None
    phone: str | None
    timezone: str | None
    locale: str | None
    quiet_hours: Mapping[str, str] | None  # {"from": "22:00", "to": "08:00"}
    attributes: Mapping[str, Any] | None
    created_at: datetime
    updated_at: datetime
    # The chat channels' addresses (docs/providers.md, Chat): a column each, named by it.
    slack: str | None = None
    discord: str | None = None
    teams: str | None = None
    telegram: str | None = None
    whatsapp: str | None = None

    def address(self, channel: str) -> str | None:
        """The profile's address on ``channel`` (push has devices instead: None)."""
        if channel in _ADDRESS_COLUMNS:
            value: str | None = getattr(self, channel)
            return value
        return None

    @classmethod
    def from_row(cls, row: sa.Row[Any]) -> UserProfile:
        values = row._mapping
        return cls(**{name: values[name] for name in _PROFILE_COLUMNS})


_PROFILE_COLUMNS = tuple(column.name for column in user_profile.columns)
_ADDRESS_COLUMNS = frozenset(
    {"email", "phone", "slack", "discord", "teams", "telegram", "whatsapp"}
)


@dataclass(frozen=True)
class Device:
    token: str
    user_id: str
    platform: str
    active: bool
    deactivated_reason: str | None
    created_at: datetime
    updated_at: datetime

    @classmethod
    def from_row(cls, row: sa.Row[Any]) -> Device:
        values = row._mapping
        return cls(**{name: values[name] for name in _DEVICE_COLUMNS})


_DEVICE_COLUMNS = tuple(column.name for column in device.columns)


async def put_user(
    db: Database,
    user_id: str,
    *,
    email: str | None,
    phone: str | None,
    timezone: str | None,
    locale: str | None,
    attributes: Mapping[str, Any] | None,
    now: datetime,
    slack: str | None = None,
    discord: str | None = None,
    teams: str | None = None,
    telegram: str | None = None,
    whatsapp: str | None = None,
) -> None:
    """Create or replace a profile. Its quiet hours (set with the preferences, by
    ``put_user_settings``) and its ``created_at`` are kept on replace."""
    row = {
        "id": user_id,
        "email": email,
        "phone": phone,
        "slack": slack,
        "discord": discord,
        "teams": teams,
        "telegram": telegram,
        "whatsapp": whatsapp,
        "timezone": timezone,
        "locale": locale,
        "attributes": attributes,
        "created_at": now,
        "updated_at": now,
    }
    await upsert(db, user_profile, ["id"], row)


async def put_user_settings(
    db: Database, user_id: str, values: dict[str, Any], now: datetime
) -> None:
    """Set some fields of a profile (timezone, locale, quiet hours), creating it if need be."""
    await upsert(
        db, user_profile, ["id"], {"id": user_id, **values, "created_at": now, "updated_at": now}
    )


# Read for every batch accepted, claimed or expanded (a campaign page is 10,000 users): one
# array parameter, where SQLAlchemy would render an IN list of every id each time.
_PG_USERS = "SELECT {} FROM user_profile WHERE id = ANY($1::text[])".format(
    ", ".join(_PROFILE_COLUMNS)
)


async def get_users(db: Database, ids: Collection[str]) -> dict[str, UserProfile]:
    if not ids:
        return {}
    rows = await _profiles.of(db)(db, list(ids))
    return {
        row["id"]: UserProfile(**{name: row[name] for name in _PROFILE_COLUMNS}) for row in rows
    }


async def _profiles_postgres(db: Database, ids: list[str]) -> Sequence[Mapping[Any, Any]]:
    async with db.asyncpg() as conn:
        rows: Sequence[Mapping[Any, Any]] = await conn.fetch(_PG_USERS, ids)
    return rows


async def _profiles_sqlite(db: Database, ids: list[str]) -> Sequence[Mapping[Any, Any]]:
    query = sa.select(user_profile).where(user_profile.c.id.in_(ids))
    async with db.engine.connect() as conn:
        return [row._mapping for row in await conn.execute(query)]


_profiles = Variants(postgres=_profiles_postgres, sqlite=_profiles_sqlite)


async def get_user(db: Database, user_id: str) -> UserProfile | None:
    return (await get_users(db, [user_id])).get(user_id)


async def put_device(db: Database, token: str, user_id: str, platform: str, now: datetime) -> None:
    """Register (or re-register, which reactivates) a push token."""
    row = {
        "token": token,
        "user_id": user_id,
        "platform": platform,
        "active": True,
        "deactivated_reason": None,
        "created_at": now,
        "updated_at": now,
    }
    await upsert(db, device, ["token"], row)


async def delete_device(db: Database, token: str) -> bool:
    async with db.engine.begin() as conn:
        result = await conn.execute(sa.delete(device).where(device.c.token == token))
    return result.rowcount > 0


async def get_device(db: Database, token: str) -> Device | None:
    query = sa.select(device).where(device.c.token == token)
    async with db.engine.connect() as conn:
        row = (await conn.execute(query)).first()
    return None if row is None else Device.from_row(row)


async def platforms(db: Database, tokens: Collection[str]) -> dict[str, str]:
    """The platform of each registered token (tokens given directly are not registered)."""
    if not tokens:
        return {}
    query = sa.select(device.c.token, device.c.platform).where(device.c.token.in_(list(tokens)))
    async with db.engine.connect() as conn:
        return {row.token: row.platform for row in await conn.execute(query)}


async def user_devices(db: Database, user_id: str) -> list[Device]:
    query = sa.select(device).where(device.c.user_id == user_id).order_by(device.c.created_at)
    async with db.engine.connect() as conn:
        return [Device.from_row(row) for row in await conn.execute(query)]


_PG_DEVICES = """
SELECT user_id, token, active FROM device WHERE user_id = ANY($1::text[]) ORDER BY created_at
"""


async def active_device_tokens(db: Database, user_ids: Collection[str]) -> dict[str, list[str]]:
    if not user_ids:
        return {}
    rows = await _devices.of(db)(db, list(user_ids))
    # Every user with a device gets an entry, an empty list when none is active: such a
    # user is known (it registered devices), only without a working one.
    tokens: dict[str, list[str]] = {}
    for row in rows:
        active = tokens.setdefault(row["user_id"], [])
        if row["active"]:
            active.append(row["token"])
    return tokens


async def _devices_postgres(db: Database, user_ids: list[str]) -> Sequence[Mapping[Any, Any]]:
    async with db.asyncpg() as conn:
        rows: Sequence[Mapping[Any, Any]] = await conn.fetch(_PG_DEVICES, user_ids)
    return rows


async def _devices_sqlite(db: Database, user_ids: list[str]) -> Sequence[Mapping[Any, Any]]:
    query = (
        sa.select(device.c.user_id, device.c.token, device.c.active)
        .where(device.c.user_id.in_(user_ids))
        .order_by(device.c.created_at)
    )
    async with db.engine.connect() as conn:
        return [row._mapping for row in await conn.execute(query)]


_devices = Variants(postgres=_devices_postgres, sqlite=_devices_sqlite)


async def list_users(
    db: Database,
    *,
    limit: int,
    prefix: str | None = None,
    attribute: tuple[str, str] | None = None,
    after: str | None = None,
) -> list[UserProfile]:
    """Profiles in id order, after ``after``: those whose id starts with ``prefix`` and
    whose ``attribute`` (a profile field or a key of the attributes, as a segment names it)
    equals the value, compared as text."""
    query = sa.select(user_profile).order_by(user_profile.c.id).limit(limit)
    if prefix is not None:
        query = query.where(user_profile.c.id.startswith(prefix, autoescape=True))
    if attribute is not None:
        name, value = attribute
        query = query.where(audiences.condition({"field": name, "equals": value}))
    if after is not None:
        query = query.where(user_profile.c.id > after)
    async with db.engine.connect() as conn:
        return [UserProfile.from_row(row) for row in await conn.execute(query)]


async def put_users(db: Database, rows: Sequence[Mapping[str, Any]], now: datetime) -> int:
    """Create or replace many profiles in one transaction, as ``put_user`` does one (quiet
    hours and ``created_at`` kept); how many existed before."""
    ids = [row["id"] for row in rows]
    values = [
        {**{name: row.get(name) for name in _BATCH_FIELDS}, "created_at": now, "updated_at": now}
        for row in rows
    ]
    statement = db.dialect.insert(user_profile).values(values)
    updates = {name: statement.excluded[name] for name in (*_BATCH_FIELDS[1:], "updated_at")}
    statement = statement.on_conflict_do_update(index_elements=["id"], set_=updates)
    async with db.engine.begin() as conn:
        existing = await conn.execute(sa.select(sa.func.count()).where(user_profile.c.id.in_(ids)))
        replaced = int(existing.scalar_one())
        await conn.execute(statement)
    return replaced


_BATCH_FIELDS = ("id", "email", "phone", "timezone", "locale", "attributes")
