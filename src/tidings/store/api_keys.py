"""API keys (docs/security.md): created, listed and revoked by ``tidings keys``, read by the
API's keyring. Only a key's SHA-256 is stored; the key itself is shown once."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa

from tidings.store.engine import Database
from tidings.store.schema import api_key


@dataclass(frozen=True)
class StoredKey:
    id: uuid.UUID
    name: str
    key_hash: str
    prefix: str
    namespace: str
    scopes: tuple[str, ...]
    accept_rate: float | None
    created_at: datetime
    revoked_at: datetime | None

    @property
    def revoked(self) -> bool:
        return self.revoked_at is not None


class NameTaken(Exception):
    """A key of that name exists already (revoked ones included: names stay unique)."""


def _stored(row: sa.Row[tuple[object, ...]]) -> StoredKey:
    values = row._mapping
    return StoredKey(
        id=values["id"],
        name=values["name"],
        key_hash=values["key_hash"],
        prefix=values["prefix"],
        namespace=values["namespace"],
        scopes=tuple(values["scopes"]),
        accept_rate=values["accept_rate"],
        created_at=values["created_at"],
        revoked_at=values["revoked_at"],
    )


async def insert(db: Database, key: StoredKey) -> None:
    exists = sa.select(api_key.c.id).where(api_key.c.name == key.name)
    async with db.engine.begin() as conn:
        # Checked first for a clear error; the unique constraint still decides a race.
        if (await conn.execute(exists)).first() is not None:
            raise NameTaken(key.name)
        await conn.execute(
            sa.insert(api_key).values(
                id=key.id,
                name=key.name,
                key_hash=key.key_hash,
                prefix=key.prefix,
                namespace=key.namespace,
                scopes=list(key.scopes),
                accept_rate=key.accept_rate,
                created_at=key.created_at,
                revoked_at=None,
            )
        )


async def all_keys(db: Database) -> list[StoredKey]:
    """Every key, revoked ones too, oldest first."""
    query = sa.select(api_key).order_by(api_key.c.created_at, api_key.c.name)
    async with db.engine.connect() as conn:
        return [_stored(row) for row in await conn.execute(query)]


async def by_hash(db: Database, key_hash: str) -> StoredKey | None:
    query = sa.select(api_key).where(api_key.c.key_hash == key_hash)
    async with db.engine.connect() as conn:
        row = (await conn.execute(query)).first()
    return None if row is None else _stored(row)


async def any_key(db: Database) -> bool:
    """Whether a key was ever created: from then on, every request needs one."""
    async with db.engine.connect() as conn:
        return (await conn.execute(sa.select(api_key.c.id).limit(1))).first() is not None


async def revoke(db: Database, names_or_ids: Sequence[str], now: datetime) -> list[str]:
    """Revoke the keys named (by name or id); the names of those revoked now."""
    ids = [uuid.UUID(value) for value in names_or_ids if _is_uuid(value)]
    match = sa.or_(api_key.c.name.in_(list(names_or_ids)), api_key.c.id.in_(ids))
    statement = (
        sa.update(api_key)
        .where(match, api_key.c.revoked_at.is_(None))
        .values(revoked_at=now)
        .returning(api_key.c.name)
    )
    async with db.engine.begin() as conn:
        return [row.name for row in await conn.execute(statement)]


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True
