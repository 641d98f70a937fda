"""A ticket: the message the relay publishes for one delivery.

It names the delivery and the queue lease the relay set when it published it. A worker
claims the row only while it is still QUEUED under that very lease: a ticket published
twice (a relay died between the broker's acknowledgement and its commit), or one that
arrives after the reaper gave its delivery back, finds no row and is dropped.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True, slots=True)
class Ticket:
    delivery_id: uuid.UUID
    queued_until: datetime

    def encode(self) -> bytes:
        body = {"delivery": str(self.delivery_id), "queuedUntil": self.queued_until.isoformat()}
        return json.dumps(body, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, raw: bytes | None) -> Ticket | None:
        """None for anything that is not a ticket (nothing else should be on the topic)."""
        try:
            body = json.loads(raw or b"")
            until = datetime.fromisoformat(body["queuedUntil"])
            if until.tzinfo is None:
                return None
            return cls(uuid.UUID(body["delivery"]), until)
        except (ValueError, KeyError, TypeError):
            return None


def partition_key(user_id: str | None, delivery_id: uuid.UUID) -> bytes:
    """Keyed by user, so one user's messages of a topic stay in order."""
    return (user_id or str(delivery_id)).encode()
