"""The running service's shared parts, built once from settings and passed around."""

from __future__ import annotations

from dataclasses import dataclass, field

from tidings.dispatch.wakeup import Wakeup
from tidings.settings import Settings
from tidings.store.engine import Database, connect


@dataclass
class Service:
    settings: Settings
    db: Database
    wakeup: Wakeup = field(default_factory=Wakeup)

    @classmethod
    def from_settings(cls, settings: Settings) -> Service:
        return cls(
            settings=settings, db=connect(settings.database_url, settings.database_pool_size)
        )

    async def close(self) -> None:
        await self.db.dispose()
