"""What a provider's event means for tidings: pure mapping, no I/O.

Each SendGrid event or Twilio status callback becomes one ``Tracked``: how to find its
delivery, the status it moves the delivery to (forward only; the store enforces that), the
event kind recorded in the delivery's history, and whether the address is suppressed.
Events that mean nothing to tidings (SendGrid ``processed``, ``group_resubscribe``, unknown
names; Twilio ``queued``/``sending``/``sent``...) map to ``None`` and are ignored.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from tidings.states import FailureKind, Status
from tidings.store.tracking import DeliveryKey, Failure, Tracked
from tidings.tracking.user_agents import provider_open

# SendGrid event -> (kind, status, suppression reason); bounce is decided by its type.
_SENDGRID: dict[str, tuple[str, Status | None, str | None]] = {
    "delivered": ("delivered", Status.DELIVERED, None),
    # SendGrid will not send to this address (it bounced, complained, unsubscribed, or is
    # invalid): the email is not going anywhere, and further sends would be dropped too.
    "dropped": ("dropped", Status.FAILED, "dropped"),
    "deferred": ("deferred", None, None),
    "spamreport": ("complained", None, "complaint"),
    "unsubscribe": ("unsubscribed", None, "unsubscribed"),
    "group_unsubscribe": ("unsubscribed", None, "unsubscribed"),
    "open": ("opened", None, None),
    "click": ("clicked", None, None),
}
_HARD_BOUNCE = ("bounced", Status.BOUNCED, "hard_bounce")
_BLOCKED = ("blocked", None, None)
# Event fields worth keeping in the history (never the address: it is on the delivery).
_SENDGRID_DETAIL = ("reason", "status", "type", "attempt", "url", "asm_group_id", "response")

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


def sendgrid_event(event: Mapping[str, Any], now: datetime) -> Tracked | None:
    """One Event Webhook event; None when it is not one tidings records."""
    name = event.get("event")
    mapped = _sendgrid_mapping(name, event.get("type"))
    if mapped is None:
        return None
    kind, status, suppress = mapped
    sg_event_id = _text(event.get("sg_event_id"))
    detail = {k: event[k] for k in _SENDGRID_DETAIL if event.get(k) not in (None, "")}
    if sg_event_id:
        detail["event_id"] = sg_event_id
    if kind == "opened":
        detail |= provider_open(event.get("useragent"), event.get("sg_machine_open"))
    failure = None
    if status is Status.FAILED:
        failure = Failure(FailureKind.PERMANENT, f"sendgrid dropped: {detail.get('reason', '')}")
    return Tracked(
        key=DeliveryKey(_uuid(event.get("delivery_id")), _sendgrid_msg_id(event)),
        kind=kind,
        at=_timestamp(event.get("timestamp"), now),
        event_id=sg_event_id or _digest(event),
        status=status,
        suppress=suppress,
        detail=detail,
        failure=failure,
    )


def _digest(event: Mapping[str, Any]) -> str:
    """The dedupe id of an event without ``sg_event_id``: a digest of all of it. SendGrid
    retries a batch with the same events, so a replay has the same digests; two events
    alike in every field (timestamps are in seconds) count once."""
    canonical = json.dumps(event, sort_keys=True, separators=(",", ":"), default=str)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def _sendgrid_mapping(name: Any, bounce_type: Any) -> tuple[str, Status | None, str | None] | None:
    if name == "bounce":
        # "blocked" is the receiving server refusing this message (policy, reputation): the
        # address may be fine. Older payloads have no type: a bounce is a bounce.
        return _BLOCKED if bounce_type == "blocked" else _HARD_BOUNCE
    return _SENDGRID.get(name) if isinstance(name, str) else None


def _sendgrid_msg_id(event: Mapping[str, Any]) -> str | None:
    """X-Message-Id is the part of ``sg_message_id`` before its first dot."""
    sg_message_id = _text(event.get("sg_message_id"))
    return sg_message_id.split(".", 1)[0] if sg_message_id else None


def twilio_callback(
    form: Mapping[str, str], now: datetime, delivery_id: str | None = None
) -> Tracked | None:
    """One status callback (``delivery_id``: the one its URL names); None for statuses that
    add nothing to what the send recorded."""
    sid = form.get("MessageSid") or form.get("SmsSid")
    status = (form.get("MessageStatus") or form.get("SmsStatus") or "").lower()
    if not sid or status not in ("delivered", "undelivered", "failed"):
        return None
    key = DeliveryKey(_uuid(delivery_id), sid)
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


def _timestamp(value: Any, now: datetime) -> datetime:
    """The event's Unix time; ``now`` when absent or absurd."""
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 < value < 2**33:
        return datetime.fromtimestamp(value, UTC)
    return now


def _uuid(value: Any) -> uuid.UUID | None:
    if not isinstance(value, str):
        return None
    try:
        return uuid.UUID(value)
    except ValueError:
        return None


def _text(value: Any) -> str | None:
    return value[:255] if isinstance(value, str) and value else None
