"""What the dispatcher needs of each notification type: its retry policy and ttl."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from tidings.catalog import TypeCatalog
from tidings.dispatch.retry import RetryPolicy
from tidings.policy.preferences import required_channels

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TypeRules:
    retry: RetryPolicy
    ttl_seconds: int | None
    required_channels: frozenset[str] = frozenset()
    default_locale: str | None = None
    collapse_key: str | None = None


class TypeCache:
    """Rules per type, rebuilt whenever the catalog reloads (every few seconds)."""

    def __init__(self, catalog: TypeCatalog, default_retry: RetryPolicy) -> None:
        self.catalog = catalog
        self.default_retry = default_retry
        self._rules: dict[str, TypeRules] = {}
        self._version = -1

    async def refresh_if_stale(self) -> None:
        types = await self.catalog.all()
        if self._version == self.catalog.version:
            return
        self._rules = {}
        for name, row in types.items():
            try:
                self._rules[name] = self._build(row)
            except Exception as error:
                # One unreadable stored type must not stop every lane from claiming: its
                # deliveries go by the defaults.
                log.error(
                    "type %s: unreadable rules (%s); using defaults", name, type(error).__name__
                )
        self._version = self.catalog.version

    def _build(self, row: dict[str, Any]) -> TypeRules:
        return TypeRules(
            self.default_retry.with_overrides(row["retry"]),
            row["ttl_seconds"],
            required_channels(row),
            row.get("default_locale"),
            row.get("collapse_key"),
        )

    def rules(self, type_name: str) -> TypeRules:
        found = self._rules.get(type_name)
        return found if found is not None else TypeRules(self.default_retry, None)
