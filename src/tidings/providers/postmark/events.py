"""What a Postmark webhook record means for tidings: pure mapping, no I/O.

Each record (Delivery, Bounce, SpamComplaint, SubscriptionChange, Open, Click) becomes one
``Tracked``: how to find its delivery (our id from the metadata tidings sent, else
Postmark's MessageID), the status it moves to, the history kind, the suppression reason.
Records tidings does not record map to ``None`` and are counted as ignored."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from tidings.providers._fields import MAX_TEXT, history_detail, text, uuid_or_none
from tidings.providers.postmark.adapter import DELIVERY_METADATA
from tidings.states import Status
from tidings.store.tracking import DeliveryKey, Tracked
from tidings.tracking.user_agents import provider_open

_Mapped = tuple[str, Status | None, str | None]  # history kind, status, suppression reason

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
    detail = history_detail(record, _POSTMARK_DETAIL)
    if record.get("OriginalLink"):
        detail["url"] = str(record["OriginalLink"])
    if kind == "opened":
        detail |= provider_open(record.get("UserAgent"))
    metadata = record.get("Metadata")
    ours = metadata.get(DELIVERY_METADATA) if isinstance(metadata, Mapping) else None
    return Tracked(
        key=DeliveryKey(uuid_or_none(ours), text(record.get("MessageID"))),
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
    if len(joined) <= MAX_TEXT:
        return joined
    return f"{record_type}:{hashlib.sha256(joined.encode()).hexdigest()}"


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
