"""Template versions: appended, never changed, the newest per (type, channel, locale) in use."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from tidings.ids import new_id
from tidings.store.engine import Database
from tidings.store.schema import template

PARTS = ("subject", "text", "html", "data")


def _key(type_name: str, channel: str, locale: str) -> sa.ColumnElement[bool]:
    return sa.and_(
        template.c.type == type_name, template.c.channel == channel, template.c.locale == locale
    )


async def add_version(
    db: Database, type_name: str, channel: str, locale: str, parts: dict[str, Any], now: datetime
) -> tuple[dict[str, Any], bool]:
    """Store ``parts`` as the next version, unless they equal the newest one; returns the
    version in use and whether it is new. Two uploads racing for one number: one retries."""
    for _ in range(3):
        latest = await _latest(db, type_name, channel, locale)
        if latest is not None and all(latest[p] == parts.get(p) for p in PARTS):
            return latest, False
        row = {
            "id": new_id(),
            "type": type_name,
            "channel": channel,
            "locale": locale,
            "version": (latest["version"] if latest else 0) + 1,
            "created_at": now,
            **{p: parts.get(p) for p in PARTS},
        }
        try:
            async with db.engine.begin() as conn:
                await conn.execute(sa.insert(template), row)
        except IntegrityError:
            continue
        return row, True
    raise RuntimeError("template version conflict persisted over three tries")


async def _latest(db: Database, type_name: str, channel: str, locale: str) -> dict[str, Any] | None:
    rows = await versions(db, type_name, channel, locale, limit=1)
    return rows[0] if rows else None


async def versions(
    db: Database, type_name: str, channel: str, locale: str, limit: int = 100
) -> list[dict[str, Any]]:
    """Newest first."""
    statement = (
        sa.select(template)
        .where(_key(type_name, channel, locale))
        .order_by(template.c.version.desc())
        .limit(limit)
    )
    async with db.engine.connect() as conn:
        return [dict(row._mapping) for row in await conn.execute(statement)]


async def latest_all(db: Database, type_name: str | None = None) -> list[dict[str, Any]]:
    """The newest version of every (type, channel, locale), or only of ``type_name``."""
    newest = (
        sa.select(
            template.c.type,
            template.c.channel,
            template.c.locale,
            sa.func.max(template.c.version).label("version"),
        )
        .group_by(template.c.type, template.c.channel, template.c.locale)
        .subquery()
    )
    statement = sa.select(template).join(
        newest,
        sa.and_(
            template.c.type == newest.c.type,
            template.c.channel == newest.c.channel,
            template.c.locale == newest.c.locale,
            template.c.version == newest.c.version,
        ),
    )
    if type_name is not None:
        statement = statement.where(template.c.type == type_name)
    async with db.engine.connect() as conn:
        rows = await conn.execute(statement.order_by(template.c.channel, template.c.locale))
        return [dict(row._mapping) for row in rows]
