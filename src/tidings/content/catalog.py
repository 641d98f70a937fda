"""The newest template versions, compiled and cached in the process.

Reloaded when older than ``max_age`` seconds (the dispatcher's lanes and preview ask), at
once when a lookup misses (a template uploaded through another process is usable at once),
and by the process that stores a version, right after storing it (``reload_now``): preview
shows the newest version at once there, and within ``max_age`` in other processes.
Compiled templates are kept by version id, so a reload compiles only what is new.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict

from tidings.content.render import CompiledTemplate, compile_row
from tidings.singleflight import SingleFlight
from tidings.store import templates
from tidings.store.engine import Database

Key = tuple[str, str, str]  # (type, channel, locale)


class TemplateCatalog:
    def __init__(self, db: Database, max_age: float = 2.0) -> None:
        self.db = db
        self.max_age = max_age
        self._newest: dict[Key, CompiledTemplate] = {}
        self._compiled: dict[uuid.UUID, CompiledTemplate] = {}
        self._loaded_at = float("-inf")
        self._reload_once = SingleFlight(self._reload)
        self._started = 0  # reads started, numbered
        self._installed = 0  # the number of the read the cache holds

    async def reload(self) -> None:
        """Read the newest versions; concurrent callers share one read."""
        await self._reload_once()

    async def reload_now(self) -> None:
        """Read the newest versions in a read of its own, for a caller that has just written
        one (a shared read in flight may have started before the write)."""
        await self._reload()

    async def _reload(self) -> None:
        self._started += 1
        number = self._started
        newest: dict[Key, CompiledTemplate] = {}
        for row in await templates.latest_all(self.db):
            # Compiling a large template takes tens of milliseconds: off the event loop.
            compiled = self._compiled.get(row.id)
            if compiled is None:
                compiled = await asyncio.to_thread(compile_row, asdict(row))
            newest[(row.type, row.channel, row.locale)] = compiled
        if number < self._installed:
            return  # a read started later has already installed what it saw
        self._installed = number
        self._compiled = {t.id: t for t in newest.values()}
        self._newest = newest
        self._loaded_at = time.monotonic()

    async def refresh_if_stale(self) -> None:
        if time.monotonic() - self._loaded_at >= self.max_age:
            await self.reload()

    def find(self, type_name: str, channel: str, locales: Sequence[str]) -> CompiledTemplate | None:
        """The newest template for the first locale of ``locales`` that has one."""
        for locale in locales:
            found = self._newest.get((type_name, channel, locale))
            if found is not None:
                return found
        return None

    async def resolve(
        self, type_name: str, channel: str, locales: Sequence[str]
    ) -> CompiledTemplate | None:
        """Like ``find``, reloading when it misses (the dispatcher refreshes the cache every
        few seconds, so that new versions are used)."""
        found = self.find(type_name, channel, locales)
        if found is None:
            await self.reload()
            found = self.find(type_name, channel, locales)
        return found

    async def version(
        self, type_name: str, channel: str, locale: str, version: int
    ) -> CompiledTemplate | None:
        """One stored version, the newest or an older one (a delivery's, shown again by the
        dashboard); an older one is compiled for this call only, never kept."""
        newest = self._newest.get((type_name, channel, locale))
        if newest is not None and newest.version == version:
            return newest
        row = await templates.version_of(self.db, type_name, channel, locale, version)
        if row is None:
            return None
        return await asyncio.to_thread(compile_row, asdict(row))
