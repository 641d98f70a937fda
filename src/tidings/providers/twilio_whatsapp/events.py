"""What a Twilio WhatsApp status callback means for tidings: pure mapping, no I/O.

``delivered`` moves the delivery to DELIVERED; ``read`` records a read (and DELIVERED: a
read may come first); ``failed`` and ``undelivered`` fail it by the ``ErrorCode``, as the
request's table does (``errors.by_code``): 63016 outside the window, 63024 or 63003 not a
WhatsApp user (the number suppressed) permanent; 63018 (the sender's limit) and 63049 (Meta
held a marketing message back) ``exhausted``, which a replay may get through; the rest
permanent. ``queued``, ``sent`` and anything else add nothing."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from tidings.providers._fields import uuid_or_none
from tidings.providers.twilio_whatsapp.errors import SUPPRESS
from tidings.states import FailureKind, Status
from tidings.store.tracking import DeliveryKey, Failure, Tracked

LATER = frozenset({63018, 63049})


def status_callback(
    form: Mapping[str, str], now: datetime, delivery_id: str | None = None
) -> Tracked | None:
    sid = form.get("MessageSid") or form.get("SmsSid")
    status = (form.get("MessageStatus") or form.get("SmsStatus") or "").lower()
    if not sid or status not in ("delivered", "read", "undelivered", "failed"):
        return None
    key = DeliveryKey(uuid_or_none(delivery_id), sid)
    event_id = f"{sid}:{status}"
    if status in ("delivered", "read"):
        return Tracked(key, status, now, event_id, Status.DELIVERED)
    code = _code(form.get("ErrorCode"))
    detail: dict[str, Any] = {"status": status}
    if code:
        detail["error_code"] = code
    kind = FailureKind.EXHAUSTED if code in LATER else FailureKind.PERMANENT
    return Tracked(
        key,
        "undelivered",
        now,
        event_id,
        Status.FAILED,
        SUPPRESS.get(code) if code else None,
        detail,
        failure=Failure(kind, f"twilio whatsapp {status}: error {code or 'unknown'}"),
    )


def _code(text: str | None) -> int | None:
    return int(text) if text and text.isdigit() else None
