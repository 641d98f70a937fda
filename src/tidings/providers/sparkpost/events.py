"""What a SparkPost webhook event means for tidings: pure mapping, no I/O.

A batch is a JSON array of ``{"msys": {"<class>_event": {...}}}``. Each event becomes one
``Tracked``: its delivery by ``rcpt_meta.tidings_delivery_id`` (else the transmission id),
the status it moves to, the history kind, the suppression reason; it is deduplicated on its
``event_id``. Bounces are read by ``bounce_class`` (SparkPost's "Bounce Classification
Codes"): 10 invalid recipient, 30 no RCPT and 90 unsubscribe are hard; 50 to 54 blocks
(the receiver refused this sender or content); the rest soft. ``injection``, ``delay`` and
other types map to ``None`` or a history entry only."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from tidings.providers._fields import MAX_TEXT, history_detail, text, unix_time, uuid_or_none
from tidings.providers.sparkpost.adapter import DELIVERY_METADATA
from tidings.states import FailureKind, Status
from tidings.store.tracking import DeliveryKey, Failure, Tracked
from tidings.tracking.user_agents import provider_open

_Mapped = tuple[str, Status | None, str | None]  # history kind, status, suppression reason

_SPARKPOST: dict[str, _Mapped] = {
    "delivery": ("delivered", Status.DELIVERED, None),
    "delay": ("deferred", None, None),
    "spam_complaint": ("complained", None, "complaint"),
    "list_unsubscribe": ("unsubscribed", None, "unsubscribed"),
    "link_unsubscribe": ("unsubscribed", None, "unsubscribed"),
    "open": ("opened", None, None),
    "initial_open": ("opened", None, None),
    "click": ("clicked", None, None),
    # Never sent: SparkPost's suppression list or policy refused it.
    "policy_rejection": ("dropped", Status.FAILED, None),
    "generation_rejection": ("dropped", Status.FAILED, None),
    "generation_failure": ("failed", Status.FAILED, None),
}
HARD_CLASSES = frozenset({"10", "30", "90"})
BLOCK_CLASSES = frozenset({"50", "51", "52", "53", "54"})
_DETAIL = ("type", "bounce_class", "reason", "error_code", "fbtype", "target_link_url")


def sparkpost_events(batch: Any, now: datetime) -> tuple[list[Tracked], int]:
    """The events of a batch tidings records, and how many it ignored."""
    found: list[Tracked] = []
    ignored = 0
    for item in batch if isinstance(batch, list) else []:
        event = _event(item)
        tracked = sparkpost_event(event, now) if event is not None else None
        if tracked is None:
            ignored += 1
        else:
            found.append(tracked)
    return found, ignored


def sparkpost_event(event: Mapping[str, Any], now: datetime) -> Tracked | None:
    mapped = _mapping(event)
    if mapped is None:
        return None
    kind, status, suppress = mapped
    detail = history_detail(event, _DETAIL)
    if "target_link_url" in detail:
        detail["url"] = detail.pop("target_link_url")
    if kind == "opened":
        detail |= provider_open(event.get("user_agent"))
    meta = event.get("rcpt_meta")
    ours = meta.get(DELIVERY_METADATA) if isinstance(meta, Mapping) else None
    failure = None
    if status is Status.FAILED:
        failure = Failure(FailureKind.PERMANENT, f"sparkpost {event.get('type')}")
    event_id = text(event.get("event_id"))
    return Tracked(
        key=DeliveryKey(uuid_or_none(ours), text(event.get("transmission_id"))),
        kind=kind,
        at=unix_time(_number(event.get("timestamp")), now),
        event_id=f"sparkpost:{event_id}"[:MAX_TEXT] if event_id else None,
        status=status,
        suppress=suppress,
        detail=detail,
        failure=failure,
    )


def _event(item: Any) -> Mapping[str, Any] | None:
    """The one ``*_event`` object of ``{"msys": {...}}``."""
    msys = item.get("msys") if isinstance(item, Mapping) else None
    if not isinstance(msys, Mapping):
        return None
    for value in msys.values():
        if isinstance(value, Mapping):
            return value
    return None


def _mapping(event: Mapping[str, Any]) -> _Mapped | None:
    name = event.get("type")
    if name in ("bounce", "out_of_band"):
        bounce_class = str(event.get("bounce_class", ""))
        if bounce_class in HARD_CLASSES:
            return ("bounced", Status.BOUNCED, "hard_bounce")
        return (
            ("blocked", None, None)
            if bounce_class in BLOCK_CLASSES
            else ("soft_bounced", None, None)
        )
    return _SPARKPOST.get(name) if isinstance(name, str) else None


def _number(value: Any) -> Any:
    """SparkPost's timestamps are Unix seconds as a string."""
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return value
