"""What a Twilio status callback means for tidings: pure mapping, no I/O.

``delivered`` moves the delivery to DELIVERED; ``undelivered`` and ``failed`` fail it (with the
address suppressed for codes that end it); ``queued``, ``sending``, ``sent`` and anything else
add nothing to what the send recorded."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from tidings.providers._fields import uuid_or_none
from tidings.states import FailureKind, Status
from tidings.store.tracking import DeliveryKey, Failure, Tracked

# Twilio error codes on a failed/undelivered callback that end the address for SMS.
TWILIO_SUPPRESS_CODES = {
    "30005": "unknown_number",
    "30006": "landline",
    "21610": "unsubscribed_stop",
}


# Codes after which the handset may be reachable later (unreachable, unknown): the carrier
# has already retried for the validity period, so tidings does not; the delivery ends in the
# dead-letter queue (``exhausted``), where a replay tries again. Every other code is
# ``permanent``.
TWILIO_TRANSIENT_CODES = frozenset({"30003", "30008"})


def twilio_callback(
    form: Mapping[str, str], now: datetime, delivery_id: str | None = None
) -> Tracked | None:
    """One status callback (``delivery_id``: the one its URL names); None for statuses that
    add nothing to what the send recorded."""
    sid = form.get("MessageSid") or form.get("SmsSid")
    status = (form.get("MessageStatus") or form.get("SmsStatus") or "").lower()
    if not sid or status not in ("delivered", "undelivered", "failed"):
        return None
    key = DeliveryKey(uuid_or_none(delivery_id), sid)
    event_id = f"{sid}:{status}"
    if status == "delivered":
        return Tracked(key, "delivered", now, event_id, Status.DELIVERED)
    code = form.get("ErrorCode") or None
    detail: dict[str, Any] = {"status": status}
    if code:
        detail["error_code"] = code
    kind = FailureKind.EXHAUSTED if code in TWILIO_TRANSIENT_CODES else FailureKind.PERMANENT
    return Tracked(
        key,
        "undelivered",
        now,
        event_id,
        Status.FAILED,
        TWILIO_SUPPRESS_CODES.get(code) if code else None,
        detail,
        failure=Failure(kind, f"twilio {status}: error {code or 'unknown'}"),
    )
