"""What a Mailgun or Postmark webhook event means for tidings: pure mapping, no I/O.

Each event becomes one ``Tracked`` (SendGrid's: ``providers/sendgrid/events.py``): how to
find its delivery (our id from the custom variable or metadata tidings sent, else the
provider's message id), the status it moves to, the history kind, the suppression reason.
Events tidings does not record map to ``None`` and are counted as ignored.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from tidings.states import Status
from tidings.store.tracking import DeliveryKey, Tracked
from tidings.tracking.user_agents import provider_open

# The custom variable (Mailgun) and metadata key (Postmark) the adapters send.
DELIVERY_KEY = "tidings_delivery_id"
_MAX_ID = 255  # webhook_seen.event_id

_Mapped = tuple[str, Status | None, str | None]  # history kind, status, suppression reason

# --- Mailgun: {"signature": {...}, "event-data": {...}} --------------------------------------

_MAILGUN: dict[str, _Mapped] = {
    "delivered": ("delivered", Status.DELIVERED, None),
    "complained": ("complained", None, "complaint"),
    "unsubscribed": ("unsubscribed", None, "unsubscribed"),
    "opened": ("opened", None, None),
    "clicked": ("clicked", None, None),
}
# A permanent failure because Mailgun's own suppression list holds the address says why.
_MAILGUN_SUPPRESSED = {"suppress-complaint": "complaint", "suppress-unsubscribe": "unsubscribed"}
_MAILGUN_DETAIL = ("severity", "reason", "url", "log-level")
_MAILGUN_STATUS_DETAIL = ("code", "description", "message", "attempt-no")


def mailgun_event(data: Mapping[str, Any], now: datetime) -> Tracked | None:
    """One ``event-data``; None for events tidings does not record (accepted, stored…)."""
    mapped = _mailgun_mapping(data)
    if mapped is None:
        return None
    kind, status, suppress = mapped
    event_id = _text(data.get("id"))
    detail = _detail(data, _MAILGUN_DETAIL)
    delivery_status = data.get("delivery-status")
    if isinstance(delivery_status, Mapping):
        detail |= _detail(delivery_status, _MAILGUN_STATUS_DETAIL)
    if event_id:
        detail["event_id"] = event_id
    if kind == "opened":
        client = data.get("client-info")
        detail |= provider_open(client.get("user-agent") if isinstance(client, Mapping) else None)
    variables = data.get("user-variables")
    ours = variables.get(DELIVERY_KEY) if isinstance(variables, Mapping) else None
    return Tracked(
        key=DeliveryKey(_uuid(ours), _mailgun_message_id(data)),
        kind=kind,
        at=_epoch(data.get("timestamp"), now),
        event_id=event_id,
        status=status,
        suppress=suppress,
        detail=detail,
    )


def _mailgun_mapping(data: Mapping[str, Any]) -> _Mapped | None:
    name = data.get("event")
    if name == "failed":
        if data.get("severity") != "permanent":
            return ("deferred", None, None)  # Mailgun retries a temporary failure itself
        reason = _MAILGUN_SUPPRESSED.get(str(data.get("reason")), "hard_bounce")
        return ("bounced", Status.BOUNCED, reason)
    return _MAILGUN.get(name) if isinstance(name, str) else None


def _mailgun_message_id(data: Mapping[str, Any]) -> str | None:
    """``message.headers.message-id``: the send's ``id`` without its angle brackets."""
    message = data.get("message")
    headers = message.get("headers") if isinstance(message, Mapping) else None
    value = headers.get("message-id") if isinstance(headers, Mapping) else None
    return _text(value.strip().strip("<>")) if isinstance(value, str) else None


# --- Postmark: one record per POST, by RecordType --------------------------------------------

# Bounce ``Type`` -> mapping; every other type (SoftBounce, Transient, DnsError,
# AutoResponder…) is recorded as a soft bounce: Postmark keeps the address active.
_POSTMARK_BOUNCES: dict[str, _Mapped] = {
    "HardBounce": ("bounced", Status.BOUNCED, "hard_bounce"),
    "BadEmailAddress": ("bounced", Status.BOUNCED, "hard_bounce"),
    "SpamComplaint": ("complained", None, "complaint"),
    "Unsubscribe": ("unsubscribed", None, "unsubscribed"),
    "Blocked": ("blocked", None, None),
}
_SOFT_BOUNCE: _Mapped = ("soft_bounced", None, None)
# SubscriptionChange: SuppressionReason -> suppression reason, when SuppressSending is true.
_POSTMARK_SUPPRESSIONS = {
    "HardBounce": "hard_bounce",
    "SpamComplaint": "complaint",
    "ManualSuppression": "unsubscribed",
}
_POSTMARK_DETAIL = ("Type", "TypeCode", "Description", "Details", "Origin", "SuppressionReason")
# When each record type happened.
_POSTMARK_TIME = {
    "Delivery": "DeliveredAt",
    "Bounce": "BouncedAt",
    "SpamComplaint": "BouncedAt",
    "SubscriptionChange": "ChangedAt",
    "Open": "ReceivedAt",
    "Click": "ReceivedAt",
}


def postmark_event(record: Mapping[str, Any], now: datetime) -> Tracked | None:
    """One webhook record; None for record types tidings does not record."""
    record_type = record.get("RecordType")
    mapped = _postmark_mapping(record)
    if mapped is None or not isinstance(record_type, str):
        return None
    kind, status, suppress = mapped
    event_id = _postmark_event_id(record_type, record)
    detail = _detail(record, _POSTMARK_DETAIL)
    if record.get("OriginalLink"):
        detail["url"] = str(record["OriginalLink"])
    if kind == "opened":
        detail |= provider_open(record.get("UserAgent"))
    metadata = record.get("Metadata")
    ours = metadata.get(DELIVERY_KEY) if isinstance(metadata, Mapping) else None
    return Tracked(
        key=DeliveryKey(_uuid(ours), _text(record.get("MessageID"))),
        kind=kind,
        at=_iso(record.get(_POSTMARK_TIME[record_type]), now),
        event_id=event_id,
        status=status,
        suppress=suppress,
        detail=detail,
    )


def _postmark_mapping(record: Mapping[str, Any]) -> _Mapped | None:
    match record.get("RecordType"):
        case "Delivery":
            return ("delivered", Status.DELIVERED, None)
        case "Bounce":
            return _POSTMARK_BOUNCES.get(str(record.get("Type")), _SOFT_BOUNCE)
        case "SpamComplaint":
            return ("complained", None, "complaint")
        case "SubscriptionChange":
            if record.get("SuppressSending") is not True:
                return ("reactivated", None, None)  # lifting ours stays an operator's call
            reason = _POSTMARK_SUPPRESSIONS.get(str(record.get("SuppressionReason")))
            kind = "unsubscribed" if reason in (None, "unsubscribed") else "suppressed"
            return (kind, None, reason or "unsubscribed")
        case "Open":
            return ("opened", None, None)
        case "Click":
            return ("clicked", None, None)
    return None


def _postmark_event_id(record_type: str, record: Mapping[str, Any]) -> str:
    """What makes a record unique: bounces and complaints have an ``ID``; the others are
    one per message, recipient and moment."""
    if record_type in ("Bounce", "SpamComplaint") and record.get("ID") is not None:
        return f"{record_type}:{record['ID']}"
    parts = [
        record_type,
        record.get("MessageID"),
        record.get("Recipient") or record.get("Email"),
        record.get(_POSTMARK_TIME[record_type]),
        record.get("SuppressSending"),
        record.get("OriginalLink"),
    ]
    joined = ":".join("" if p is None else str(p) for p in parts)
    if len(joined) <= _MAX_ID:
        return joined
    return f"{record_type}:{hashlib.sha256(joined.encode()).hexdigest()}"


# --- Shared ----------------------------------------------------------------------------------


def _detail(source: Mapping[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    """The fields worth keeping in the history (never the address: it is on the delivery);
    long texts (bounce dumps, SMTP answers) cut short."""
    kept: dict[str, Any] = {}
    for name in names:
        value = source.get(name)
        if value in (None, ""):
            continue
        kept[name] = value[:1000] if isinstance(value, str) else value
    return kept


def _epoch(value: Any, now: datetime) -> datetime:
    """Mailgun's Unix time (a float); ``now`` when absent or absurd."""
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 < value < 2**33:
        return datetime.fromtimestamp(value, UTC)
    return now


def _iso(value: Any, now: datetime) -> datetime:
    """Postmark's ISO 8601 time (``2019-11-05T16:33:54.9070259Z``: seven fractional digits,
    more than Python reads); ``now`` when absent or unreadable."""
    if not isinstance(value, str) or len(value) > 64:
        return now
    text = value.strip().replace("Z", "+00:00")
    head, dot, rest = text.partition(".")
    if dot:
        digits = len(rest) - len(rest.lstrip("0123456789"))
        text = f"{head}.{rest[: min(digits, 6)]}{rest[digits:]}"
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return now
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _uuid(value: Any) -> uuid.UUID | None:
    if not isinstance(value, str):
        return None
    try:
        return uuid.UUID(value)
    except ValueError:
        return None


def _text(value: Any) -> str | None:
    return value[:_MAX_ID] if isinstance(value, str) and value else None
