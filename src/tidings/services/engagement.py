"""Opens and clicks tidings measures itself (docs/tracking.md), each an event in the
delivery's history."""

from __future__ import annotations

import uuid
from typing import Any

from tidings.clock import utcnow
from tidings.store import engagement
from tidings.store.engagement import CLICKED, OPENED
from tidings.store.engine import Database

__all__ = ["CLICKED", "OPENED", "record"]


async def record(db: Database, delivery_id: uuid.UUID, kind: str, detail: dict[str, Any]) -> None:
    """``kind`` (opened, clicked) in the delivery's history, now."""
    await engagement.record(db, delivery_id, kind, detail, utcnow())
