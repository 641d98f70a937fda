"""What a WhatsApp status means for tidings: pure mapping, no I/O.

``delivered`` moves the delivery to DELIVERED; ``read`` records a read (and DELIVERED, as a
read may come first); ``failed`` fails it, ``exhausted`` where Meta chose not to deliver for
now (131049, a marketing message held back for the user's experience), else ``permanent``;
``sent`` and anything else add nothing to what the send recorded."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

from tidings.providers._fields import uuid_or_none
from tidings.states import FailureKind, Status
from tidings.store.tracking import DeliveryKey, Failure, Tracked

HELD_BACK = frozenset({131049})


def statuses(notification: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    """Every status of a webhook notification (entry -> changes -> value -> statuses)."""
    for entry in _list(notification.get("entry")):
        for change in _list(entry.get("changes")):
            value = change.get("value")
            if isinstance(value, dict):
                yield from _list(value.get("statuses"))


def inbound(notification: Mapping[str, Any], now: datetime) -> list[tuple[str, datetime]]:
    """Each message a user sent (``value.messages[]``): their E.164 number and when they
    sent it, never later than ``now`` (a clock ahead must not stretch the window)."""
    found = []
    for entry in _list(notification.get("entry")):
        for change in _list(entry.get("changes")):
            value = change.get("value")
            for item in _list(value.get("messages") if isinstance(value, dict) else None):
                sender = item.get("from")
                if isinstance(sender, str) and sender.isdigit() and 7 <= len(sender) <= 15:
                    at = _at(item.get("timestamp")) or now
                    found.append((f"+{sender}", min(at, now)))
    return found


def whatsapp_status(status: Mapping[str, Any], now: datetime) -> Tracked | None:
    wamid, state = status.get("id"), status.get("status")
    if not isinstance(wamid, str) or state not in ("delivered", "read", "failed"):
        return None
    key = DeliveryKey(uuid_or_none(status.get("biz_opaque_callback_data")), wamid)
    at = _at(status.get("timestamp")) or now
    event_id = f"{wamid}:{state}"
    if state == "delivered":
        return Tracked(key, "delivered", at, event_id, Status.DELIVERED)
    if state == "read":
        return Tracked(key, "read", at, event_id, Status.DELIVERED)
    errors = _list(status.get("errors"))
    code = errors[0].get("code") if errors else None
    kind = FailureKind.EXHAUSTED if code in HELD_BACK else FailureKind.PERMANENT
    detail = {"status": "failed", "error_code": code} if code else {"status": "failed"}
    return Tracked(
        key,
        "undelivered",
        at,
        event_id,
        Status.FAILED,
        detail=detail,
        failure=Failure(kind, f"whatsapp failed: error {code or 'unknown'}"),
    )


def _list(value: Any) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _at(stamp: Any) -> datetime | None:
    try:
        return datetime.fromtimestamp(int(stamp), tz=UTC)
    except (TypeError, ValueError, OverflowError, OSError):
        return None
