"""Messages and a settable clock for the provider adapter tests."""

from __future__ import annotations

import time
import uuid
from typing import Any

from tidings.priorities import Channel, Priority
from tidings.providers.base import Content, Message


def message(
    channel: Channel,
    address: str,
    content: Content,
    *,
    type: str = "order.confirmed",
    priority: Priority = Priority.NORMAL,
    **fields: Any,
) -> Message:
    """A message as the dispatcher would build it, with fresh ids."""
    return Message(
        delivery_id=uuid.uuid4(),
        notification_id=uuid.uuid4(),
        channel=channel,
        address=address,
        type=type,
        priority=priority,
        content=content,
        **fields,
    )


def push(
    address: str,
    *,
    subject: str | None = "Your order",
    text: str = "has shipped",
    data: dict[str, Any] | None = None,
    priority: Priority = Priority.NORMAL,
    ttl: int | None = None,
    collapse: str | None = None,
) -> Message:
    return message(
        Channel.PUSH,
        address,
        Content(subject=subject, text=text, data=data or {}),
        type="order_shipped",
        priority=priority,
        ttl_seconds=ttl,
        collapse_key=collapse,
    )


class FakeClock:
    """Wall-clock seconds that a test moves by hand (token ages, expiries)."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now
