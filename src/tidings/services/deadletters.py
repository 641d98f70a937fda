"""The dead-letter queue: failed deliveries listed, and replayed with fresh attempts."""

from __future__ import annotations

import uuid
from collections.abc import Collection
from enum import Enum

from tidings.clock import utcnow
from tidings.priorities import Priority
from tidings.service import Service
from tidings.store import deadletters
from tidings.store.deadletters import DEAD_KINDS, DeadFilter, DeadLetter, count_dead
from tidings.store.engine import Database

__all__ = [
    "BULK_LIMIT",
    "DEAD_KINDS",
    "DeadFilter",
    "DeadLetter",
    "Replay",
    "count_dead",
    "listed",
    "replay",
    "replay_matching",
]

# At most this many replayed by one bulk replay (each its own transaction and event).
BULK_LIMIT = 1000


class Replay(Enum):
    REPLAYED = "replayed"  # PENDING again, its lane woken
    NOT_FAILED = "not_failed"
    NOT_FOUND = "not_found"  # no such delivery in the namespace


async def listed(
    db: Database,
    namespace: str,
    kinds: Collection[str] = DEAD_KINDS,
    limit: int = 100,
    found: DeadFilter | None = None,
) -> list[DeadLetter]:
    """The newest failed deliveries of those kinds (exhausted, poison, ambiguous by
    default), or those ``found`` matches."""
    return await deadletters.list_dead(db, namespace, kinds, limit, found)


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


async def replay_matching(
    service: Service, namespace: str, found: DeadFilter, limit: int = BULK_LIMIT
) -> tuple[int, int]:
    """Replay the newest ``limit`` dead letters ``found`` matches, one by one (each as
    ``replay``); how many were replayed, and how many had changed meanwhile (no longer
    FAILED: replayed by someone else)."""
    matching = await deadletters.list_dead(service.db, namespace, limit=limit, found=found)
    replayed = changed = 0
    for dead in matching:
        if await replay(service, dead.id, namespace) is Replay.REPLAYED:
            replayed += 1
        else:
            changed += 1
    return replayed, changed
