"""The dead-letter queue: failed deliveries listed, and replayed with fresh attempts."""

from __future__ import annotations

import uuid
from collections.abc import Collection
from enum import Enum

from tidings.clock import utcnow
from tidings.priorities import Priority
from tidings.service import Service
from tidings.store import deadletters
from tidings.store.deadletters import DEAD_KINDS, DeadLetter
from tidings.store.engine import Database

__all__ = ["DEAD_KINDS", "DeadLetter", "Replay", "listed", "replay"]


class Replay(Enum):
    REPLAYED = "replayed"  # PENDING again, its lane woken
    NOT_FAILED = "not_failed"
    NOT_FOUND = "not_found"  # no such delivery in the namespace


async def listed(
    db: Database, namespace: str, kinds: Collection[str] = DEAD_KINDS, limit: int = 100
) -> list[DeadLetter]:
    """The newest failed deliveries of those kinds (exhausted, poison, ambiguous by
    default)."""
    return await deadletters.list_dead(db, namespace, kinds, limit)


async def replay(service: Service, delivery_id: uuid.UUID, namespace: str) -> Replay:
    """Send a FAILED delivery again, with a fresh set of attempts, and wake its lane."""
    try:
        priority = await deadletters.replay(service.db, delivery_id, namespace, utcnow())
    except LookupError:
        return Replay.NOT_FOUND
    if priority is None:
        return Replay.NOT_FAILED
    service.wakeup.notify(Priority(priority))
    return Replay.REPLAYED
