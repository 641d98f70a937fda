"""Template versions: appended, never changed, the newest per (type, channel, locale) in use."""

from __future__ import annotations

import uuid
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from tidings.ids import new_id
from tidings.store.engine import Database
from tidings.store.schema import template

PARTS = ("subject", "text", "html", "data")


@dataclass(frozen=True)
class TemplateVersion:
    id: uuid.UUID
    type: str
    channel: str
    locale: str
    version: int
    subject: str | None
    text: str | None
    html: str | None
    data: dict[str, Any] | None  # push data: key -> template
    created_at: datetime

    @classmethod
    def from_row(cls, row: Any) -> TemplateVersion:
        values = row._mapping
        return cls(**{name: values[name] for name in _FIELDS})

    def parts(self) -> dict[str, Any]:
        """Every column but the id (what the API shows of a version)."""
        return {name: value for name, value in asdict(self).items() if name != "id"}


_FIELDS = tuple(TemplateVersion.__dataclass_fields__)


def _key(type_name: str, channel: str, locale: str) -> sa.ColumnElement[bool]:
    return sa.and_(
        template.c.type == type_name, template.c.channel == channel, template.c.locale == locale
    )


async def add_version(
    db: Database, type_name: str, channel: str, locale: str, parts: dict[str, Any], now: datetime
) -> tuple[TemplateVersion, bool]:
    """Store ``parts`` as the next version, unless they equal the newest one; returns the
    version in use and whether it is new. Two uploads racing for one number: one retries."""
    for _ in range(3):
        latest = await _latest(db, type_name, channel, locale)
        if latest is not None and all(getattr(latest, p) == parts.get(p) for p in PARTS):
            return latest, False
        row = TemplateVersion(
            id=new_id(),
            type=type_name,
            channel=channel,
            locale=locale,
            version=(latest.version if latest else 0) + 1,
            subject=parts.get("subject"),
            text=parts.get("text"),
            html=parts.get("html"),
            data=parts.get("data"),
            created_at=now,
        )
        try:
            async with db.engine.begin() as conn:
                await conn.execute(sa.insert(template), asdict(row))
        except IntegrityError:
            continue
        return row, True
    raise RuntimeError("template version conflict persisted over three tries")


async def _latest(
    db: Database, type_name: str, channel: str, locale: str
) -> TemplateVersion | None:
    rows = await versions(db, type_name, channel, locale, limit=1)
    return rows[0] if rows else None


async def versions(
    db: Database, type_name: str, channel: str, locale: str, limit: int = 100
) -> list[TemplateVersion]:
    """Newest first."""
    statement = (
        sa.select(template)
        .where(_key(type_name, channel, locale))
        .order_by(template.c.version.desc())
        .limit(limit)
    )
    async with db.engine.connect() as conn:
        return [TemplateVersion.from_row(row) for row in await conn.execute(statement)]


async def latest_all(db: Database, type_name: str | None = None) -> list[TemplateVersion]:
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
        return [TemplateVersion.from_row(row) for row in rows]


async def version_of(
    db: Database, type_name: str, channel: str, locale: str, version: int
) -> TemplateVersion | None:
    """One version of (type, channel, locale): the words an older delivery was sent with."""
    statement = sa.select(template).where(
        _key(type_name, channel, locale), template.c.version == version
    )
    async with db.engine.connect() as conn:
        row = (await conn.execute(statement)).first()
    return None if row is None else TemplateVersion.from_row(row)
