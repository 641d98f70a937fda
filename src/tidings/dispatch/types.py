"""The notification types as the dispatcher needs them, refreshed every few seconds."""

from __future__ import annotations

import time
from dataclasses import dataclass

import sqlalchemy as sa

from tidings.dispatch.retry import RetryPolicy
from tidings.store.engine import Database
from tidings.store.schema import notification_type


@dataclass(frozen=True)
class TypeRules:
    retry: RetryPolicy
    ttl_seconds: int | None


class TypeCache:
    def __init__(self, db: Database, default_retry: RetryPolicy, max_age: float = 5.0) -> None:
        self.db = db
        self.default_retry = default_retry
        self.max_age = max_age
        self._rules: dict[str, TypeRules] = {}
        self._loaded_at = float("-inf")

    async def refresh_if_stale(self) -> None:
        if time.monotonic() - self._loaded_at < self.max_age:
            return
        query = sa.select(
            notification_type.c.name, notification_type.c.retry, notification_type.c.ttl_seconds
        )
        async with self.db.engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        self._rules = {
            row.name: TypeRules(self.default_retry.with_overrides(row.retry), row.ttl_seconds)
            for row in rows
        }
        self._loaded_at = time.monotonic()

    def rules(self, type_name: str) -> TypeRules:
        return self._rules.get(type_name, TypeRules(self.default_retry, None))
