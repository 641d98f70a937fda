"""Producers' webhook endpoints (docs/events.md, Webhooks): where tidings posts the events
a namespace chose, their secrets, and the messages sent to each. Not the providers'
callbacks (``/v1/webhooks/...``) nor the webhook channel."""

from __future__ import annotations

import uuid

from tidings.store import producer_hooks
from tidings.store.engine import Database
from tidings.store.events import TYPES
from tidings.store.producer_hooks import (
    MAX_PREVIOUS_SECRETS,
    PENDING,
    Attempted,
    Endpoint,
    TooManyRotations,
    create,
    delete,
    enable,
    get,
    listed,
    rotate,
)

__all__ = [
    "MAX_PREVIOUS_SECRETS",
    "PENDING",
    "TYPES",
    "Attempted",
    "Endpoint",
    "TooManyRotations",
    "attempts",
    "create",
    "delete",
    "enable",
    "get",
    "listed",
    "rotate",
]


async def attempts(
    db: Database, namespace: str, endpoint_id: uuid.UUID, limit: int
) -> list[Attempted] | None:
    """The endpoint's newest messages and how each went; None when the namespace has no
    such endpoint."""
    if await get(db, namespace, endpoint_id) is None:
        return None
    return await producer_hooks.attempts(db, endpoint_id, limit)
