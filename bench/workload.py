"""The notifications every measurement uses: the same items for tidings and its baseline."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tidings.ids import new_id

TYPE_NAME = "bench.notice"
TYPE_BODY: dict[str, Any] = {
    "category": "transactional",
    "priority": "normal",
    "channels": ["email"],
}
# What each email says: a real render per delivery is part of what dispatch measures.
TEMPLATE: dict[str, Any] = {
    "subject": "Order {{ orderId }}",
    "text": "Your order {{ orderId }} comes to {{ total }}.",
}
NAMESPACE = "default"  # tidings' default namespace: the API stores this for every item
CATEGORY = "transactional"
PRIORITY = "normal"
CHANNEL = "email"


@dataclass(frozen=True)
class Item:
    """One notification as a producer would send it: one email delivery."""

    key: str
    email: str
    data: dict[str, Any]
    body: dict[str, Any] = field(init=False)

    def __post_init__(self) -> None:
        body = {"type": TYPE_NAME, "to": {"email": self.email}, "channels": [CHANNEL]}
        object.__setattr__(self, "body", body | {"data": self.data})

    def batch_body(self) -> dict[str, Any]:
        return {"idempotencyKey": self.key, **self.body}


def items(count: int, prefix: str) -> list[Item]:
    return [
        Item(f"{prefix}-{i}", f"user{i}@example.com", {"orderId": i, "total": "19.90"})
        for i in range(count)
    ]


def request_hash(item: Item) -> str:
    canonical = json.dumps(item.body, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


NotificationRow = tuple[Any, ...]
DeliveryRow = tuple[Any, ...]

NOTIFICATION_COLUMNS = (
    "id",
    "namespace",
    "idempotency_key",
    "request_hash",
    "type",
    "category",
    "priority",
    "data",
    "created_at",
)
NOTIFICATION_TYPES = (
    "uuid",
    "text",
    "text",
    "text",
    "text",
    "text",
    "text",
    "jsonb",
    "timestamptz",
)
DELIVERY_COLUMNS = (
    "id",
    "notification_id",
    "channel",
    "address",
    "priority",
    "category",
    "status",
    "attempts",
    "next_attempt_at",
    "created_at",
    "updated_at",
)
DELIVERY_TYPES = (
    "uuid",
    "uuid",
    "text",
    "text",
    "text",
    "text",
    "text",
    "int4",
    "timestamptz",
    "timestamptz",
    "timestamptz",
)


def rows(item: Item, now: datetime) -> tuple[NotificationRow, DeliveryRow]:
    """The notification and delivery rows tidings stores for ``item`` (NULL columns left out)."""
    notification_id = new_id()
    notification = (
        notification_id,
        NAMESPACE,
        item.key,
        request_hash(item),
        TYPE_NAME,
        CATEGORY,
        PRIORITY,
        json.dumps(item.data),
        now,
    )
    delivery = (
        new_id(),
        notification_id,
        CHANNEL,
        item.email,
        PRIORITY,
        CATEGORY,
        "PENDING",
        0,
        now,
        now,
        now,
    )
    return notification, delivery
