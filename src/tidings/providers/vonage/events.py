"""What a Vonage message status callback means for tidings: pure mapping, no I/O.

The callback is JSON: ``message_uuid``, ``to``, ``from``, ``timestamp`` (ISO 8601),
``status`` and, for a message that did not arrive, ``error`` (``type``, ``title``,
``detail``), plus the ``client_ref`` tidings sent: the delivery id. ``delivered`` moves the
delivery to DELIVERED; ``rejected``, ``undeliverable`` and ``failed`` fail it (the
provider accepted it, then gave up); ``submitted`` and anything else add nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from tidings.providers._fields import MAX_TEXT, text, uuid_or_none
from tidings.states import FailureKind, Status
from tidings.store.tracking import DeliveryKey, Failure, Tracked

FAILED_STATUSES = frozenset({"rejected", "undeliverable", "failed"})


def vonage_status(event: Mapping[str, Any], now: datetime) -> Tracked | None:
    """One status callback; None for statuses that add nothing to what the send recorded."""
    message_uuid = text(event.get("message_uuid"))
    status = str(event.get("status") or "").lower()
    if not message_uuid or (status != "delivered" and status not in FAILED_STATUSES):
        return None
    key = DeliveryKey(uuid_or_none(event.get("client_ref")), message_uuid)
    event_id = f"{message_uuid}:{status}"
    at = _timestamp(event.get("timestamp"), now)
    if status == "delivered":
        return Tracked(key, "delivered", at, event_id, Status.DELIVERED)
    detail = {"status": status, **_error_detail(event.get("error"))}
    code = detail.get("error_code") or "unknown"
    return Tracked(
        key,
        "undelivered",
        at,
        event_id,
        Status.FAILED,
        detail=detail,
        failure=Failure(FailureKind.PERMANENT, f"vonage {status}: error {code}"),
    )


def _error_detail(error: Any) -> dict[str, str]:
    """The error's code (its ``title``, a number or a word) and words, for the history."""
    if not isinstance(error, Mapping):
        return {}
    found = {"error_code": error.get("title"), "error_detail": error.get("detail")}
    return {k: str(v)[:MAX_TEXT] for k, v in found.items() if v not in (None, "")}


def _timestamp(value: Any, now: datetime) -> datetime:
    """The event's time; ``now`` when absent, unreadable or without a zone."""
    if not isinstance(value, str):
        return now
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return now
    return parsed if parsed.tzinfo is not None else now
