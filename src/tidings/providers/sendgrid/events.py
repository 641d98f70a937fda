"""What a SendGrid event means for tidings: pure mapping, no I/O.

Each event of the Event Webhook becomes one ``Tracked``: how to find its delivery, the status
it moves the delivery to (forward only; the store enforces that), the event kind recorded in
the delivery's history, and whether the address is suppressed. Events that mean nothing to
tidings (``processed``, ``group_resubscribe``, unknown names) map to ``None`` and are
ignored.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from tidings.providers._fields import text, unix_time, uuid_or_none
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


def sendgrid_event(event: Mapping[str, Any], now: datetime) -> Tracked | None:
    """One Event Webhook event; None when it is not one tidings records."""
    name = event.get("event")
    mapped = _sendgrid_mapping(name, event.get("type"))
    if mapped is None:
        return None
    kind, status, suppress = mapped
    sg_event_id = text(event.get("sg_event_id"))
    detail = {k: event[k] for k in _SENDGRID_DETAIL if event.get(k) not in (None, "")}
    if sg_event_id:
        detail["event_id"] = sg_event_id
    if kind == "opened":
        detail |= provider_open(event.get("useragent"), event.get("sg_machine_open"))
    failure = None
    if status is Status.FAILED:
        failure = Failure(FailureKind.PERMANENT, f"sendgrid dropped: {detail.get('reason', '')}")
    return Tracked(
        key=DeliveryKey(uuid_or_none(event.get("delivery_id")), _sendgrid_msg_id(event)),
        kind=kind,
        at=unix_time(event.get("timestamp"), now),
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
    sg_message_id = text(event.get("sg_message_id"))
    return sg_message_id.split(".", 1)[0] if sg_message_id else None
