"""What the dispatcher needs of a notification type, read from the store's type catalog."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tidings.dispatch.pipeline.retry import RetryPolicy
from tidings.store.types import NotificationType, TypeCatalog

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TypeRules:
    retry: RetryPolicy
    ttl_seconds: int | None
    required_channels: frozenset[str] = frozenset()
    default_locale: str | None = None
    collapse_key: str | None = None
    # The type's email sender (fromAddress, fromName, replyTo); None: the account's.
    email: Mapping[str, Any] | None = None
    # Opens and clicks measured by tidings in the type's email (docs/tracking.md).
    track_opens: bool = False
    track_clicks: bool = False


class TypeRulebook:
    """The rules of each type, from the catalog's cached rows. Not a second cache: the rules
    of a row are kept only while the catalog holds that very row object (a reload or a
    look-up replaces it), which saves rebuilding them per delivery (several microseconds
    each, a few times per send)."""

    def __init__(self, catalog: TypeCatalog, default_retry: RetryPolicy) -> None:
        self.catalog = catalog
        self.default_retry = default_retry
        self._derived: dict[str, tuple[NotificationType, TypeRules]] = {}
        self._default = TypeRules(default_retry, None)

    async def refresh_if_stale(self) -> None:
        await self.catalog.refresh_if_stale()

    def rules(self, type_name: str) -> TypeRules:
        kind = self.catalog.cached(type_name)
        if kind is None:
            return self._default
        derived = self._derived.get(type_name)
        if derived is not None and derived[0] is kind:
            return derived[1]
        rules = self._build(kind)
        self._derived[type_name] = (kind, rules)  # at most one entry per stored type
        return rules

    def _build(self, kind: NotificationType) -> TypeRules:
        try:
            retry = self.default_retry.with_overrides(kind.retry)
        except Exception as error:
            # One unreadable stored type must not stop every lane from sending: its
            # deliveries go by the defaults (logged once per row read).
            log.error(
                "type %s: unreadable retry (%s); using defaults", kind.name, type(error).__name__
            )
            retry = self.default_retry
        return TypeRules(
            retry,
            kind.ttl_seconds,
            kind.required,
            kind.default_locale,
            kind.collapse_key,
            kind.email,
            kind.tracked["opens"],
            kind.tracked["clicks"],
        )
