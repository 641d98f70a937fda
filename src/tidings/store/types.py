"""Notification types: the row, its reads and writes, and the process-wide cache of them."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from functools import cached_property
from typing import Any

import sqlalchemy as sa

from tidings.priorities import Category
from tidings.singleflight import SingleFlight
from tidings.store.engine import Database
from tidings.store.schema import notification_type
from tidings.store.upsert import upsert


@dataclass(frozen=True)
class NotificationType:
    name: str
    category: str
    priority: str
    channels: Sequence[str]
    ttl_seconds: int | None
    # Retry overrides, camelCase keys as the API takes them (baseDelay, maxDelay, maxAttempts).
    retry: Mapping[str, Any] | None
    # As stored; ``required`` is what applies.
    required_channels: Sequence[str] | None
    default_locale: str | None
    collapse_key: str | None
    created_at: datetime
    updated_at: datetime
    # The type's email sender, camelCase keys as the API takes them (fromAddress, fromName,
    # replyTo); None: the account's.
    email: Mapping[str, Any] | None = None
    # As stored ({"opens", "clicks"}); ``tracked`` is what applies.
    tracking: Mapping[str, bool] | None = None
    # The steps as the API took them (docs/workflows.md); None: send every channel at once.
    workflow: Sequence[Mapping[str, Any]] | None = None

    @classmethod
    def from_row(cls, row: sa.Row[Any]) -> NotificationType:
        values = row._mapping
        return cls(**{name: values[name] for name in _COLUMNS})

    # Computed once per row read (the rows are rebuilt only when the catalog reloads).
    @cached_property
    def required(self) -> frozenset[str]:
        """Channels on which preferences do not apply: by default, every channel of a
        transactional type (a receipt or a password reset cannot be switched off)."""
        if self.required_channels is not None:
            return frozenset(self.required_channels)
        if self.category == Category.TRANSACTIONAL.value:
            return frozenset(self.channels)
        return frozenset()

    @cached_property
    def tracked(self) -> Mapping[str, bool]:
        """Opens and clicks measured in its email: by default, on for marketing and off
        for everything else (a receipt need not report who read it)."""
        default = self.category == Category.MARKETING.value
        stored = self.tracking or {}
        return {"opens": stored.get("opens", default), "clicks": stored.get("clicks", default)}


_COLUMNS = tuple(column.name for column in notification_type.columns)


async def put_type(db: Database, kind: NotificationType) -> None:
    """Create or replace a type (its ``created_at`` is kept on replace)."""
    row = {name: value for name, value in asdict(kind).items() if name in _COLUMNS}
    await upsert(db, notification_type, ["name"], row)


async def get_types(db: Database, names: Collection[str]) -> dict[str, NotificationType]:
    if not names:
        return {}
    query = sa.select(notification_type).where(notification_type.c.name.in_(list(names)))
    async with db.engine.connect() as conn:
        return {row.name: NotificationType.from_row(row) for row in await conn.execute(query)}


async def get_type(db: Database, name: str) -> NotificationType | None:
    return (await get_types(db, [name])).get(name)


async def all_types(db: Database) -> dict[str, NotificationType]:
    async with db.engine.connect() as conn:
        rows = await conn.execute(sa.select(notification_type))
        return {row.name: NotificationType.from_row(row) for row in rows}


class TypeCatalog:
    """Types read from the database at most every ``max_age`` seconds, read on nearly every
    request and send and changed rarely. A name not in the cache is looked up alone at once,
    so a type registered through another process is usable at once; a change to an existing
    type reaches other processes within ``max_age``. A name found missing is remembered for
    ``max_age`` (at most ``max_misses`` names), so a stream of made-up names costs neither a
    full reload each nor memory without bound."""

    def __init__(self, db: Database, max_age: float = 2.0, max_misses: int = 1024) -> None:
        self.db = db
        self.max_age = max_age
        self.max_misses = max_misses
        self._types: dict[str, NotificationType] = {}
        self._loaded_at = float("-inf")
        self._reload_once = SingleFlight(self._reload)
        self._misses: OrderedDict[str, float] = OrderedDict()  # name -> when found missing

    async def get(self, names: Collection[str]) -> dict[str, NotificationType]:
        """The types of those ``names`` that exist."""
        await self.refresh_if_stale()
        unknown = [name for name in names if name not in self._types and not self._missed(name)]
        if unknown:
            await self._look_up(unknown)
        return {name: self._types[name] for name in names if name in self._types}

    async def refresh_if_stale(self) -> None:
        if time.monotonic() - self._loaded_at >= self.max_age:
            await self.reload()

    def cached(self, name: str) -> NotificationType | None:
        """The type as last read, without reading (call ``refresh_if_stale`` now and then)."""
        return self._types.get(name)

    async def all(self) -> dict[str, NotificationType]:
        await self.refresh_if_stale()
        return self._types

    async def reload(self) -> None:
        """Read every type; concurrent callers share one read."""
        await self._reload_once()

    async def _reload(self) -> None:
        self._types = await all_types(self.db)
        self._loaded_at = time.monotonic()
        self._misses.clear()

    async def _look_up(self, names: list[str]) -> None:
        found = await get_types(self.db, names)
        if found:
            # A new dict, not an update in place: callers may be iterating the old one.
            self._types = {**self._types, **found}
        now = time.monotonic()
        for name in names:
            if name not in found:
                self._misses[name] = now
                self._misses.move_to_end(name)
        while len(self._misses) > self.max_misses:
            self._misses.popitem(last=False)

    def _missed(self, name: str) -> bool:
        at = self._misses.get(name)
        return at is not None and time.monotonic() - at < self.max_age

    def invalidate(self) -> None:
        """Forget what was read (a type was stored through this process)."""
        self._loaded_at = float("-inf")
        self._misses.clear()
