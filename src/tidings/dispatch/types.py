"""What the dispatcher needs of a notification type, read from the store's type catalog."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from tidings.dispatch.retry import RetryPolicy
from tidings.store.types import TypeCatalog

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TypeRules:
    retry: RetryPolicy
    ttl_seconds: int | None
    required_channels: frozenset[str] = frozenset()
    default_locale: str | None = None
    collapse_key: str | None = None


class TypeRulebook:
    """The rules of each type, from the catalog's cached rows (no cache of its own: a type
    changed in the catalog applies at the next send)."""

    def __init__(self, catalog: TypeCatalog, default_retry: RetryPolicy) -> None:
        self.catalog = catalog
        self.default_retry = default_retry
        self._reported: set[str] = set()  # types whose unreadable rules were logged once

    async def refresh_if_stale(self) -> None:
        await self.catalog.refresh_if_stale()

    def rules(self, type_name: str) -> TypeRules:
        kind = self.catalog.cached(type_name)
        if kind is None:
            return TypeRules(self.default_retry, None)
        try:
            retry = self.default_retry.with_overrides(kind.retry)
        except Exception as error:
            # One unreadable stored type must not stop every lane from sending: its
            # deliveries go by the defaults.
            retry = self.default_retry
            if type_name not in self._reported and len(self._reported) < 10_000:
                self._reported.add(type_name)
                log.error(
                    "type %s: unreadable retry (%s); using defaults",
                    type_name,
                    type(error).__name__,
                )
        return TypeRules(
            retry, kind.ttl_seconds, kind.required, kind.default_locale, kind.collapse_key
        )
