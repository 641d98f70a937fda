"""The event log of a namespace, a page at a time after a stable cursor (docs/events.md)."""

from __future__ import annotations

from tidings.store.events import TYPES, Cursor, Event, Page, page, payload

__all__ = ["TYPES", "Cursor", "Event", "Page", "page", "payload"]
