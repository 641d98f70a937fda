"""The notification types, cached in the process: read on nearly every request and send,
changed rarely."""

from __future__ import annotations

import time
from collections.abc import Collection
from typing import Any

from tidings.singleflight import SingleFlight
from tidings.store import registry
from tidings.store.engine import Database


class TypeCatalog:
    """Types read from the database at most every ``max_age`` seconds. A name not known yet
    is looked up at once, so a type registered through another process is usable at once;
    a change to an existing type reaches other processes within ``max_age``."""

    def __init__(self, db: Database, max_age: float = 2.0) -> None:
        self.db = db
        self.max_age = max_age
        self._types: dict[str, dict[str, Any]] = {}
        self._loaded_at = float("-inf")
        self._reload_once = SingleFlight(self._reload)
        self.version = 0  # bumped on every reload, for caches derived from the types

    async def get(self, names: Collection[str]) -> dict[str, dict[str, Any]]:
        """The rows of those ``names`` that exist."""
        stale = time.monotonic() - self._loaded_at >= self.max_age
        if stale or any(name not in self._types for name in names):
            await self.reload()
        return {name: self._types[name] for name in names if name in self._types}

    async def all(self) -> dict[str, dict[str, Any]]:
        if time.monotonic() - self._loaded_at >= self.max_age:
            await self.reload()
        return self._types

    async def reload(self) -> None:
        """Read every type; concurrent callers share one read."""
        await self._reload_once()

    async def _reload(self) -> None:
        self._types = await registry.all_types(self.db)
        self._loaded_at = time.monotonic()
        self.version += 1

    def invalidate(self) -> None:
        self._loaded_at = float("-inf")
