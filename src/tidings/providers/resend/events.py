"""What a Resend webhook event means for tidings: pure mapping, no I/O.

Each event (``{"type", "created_at", "data"}``) becomes one ``Tracked``: its delivery by the
``tidings_delivery_id`` tag tidings sent (else Resend's ``data.email_id``), the status it
moves to, the history kind and the suppression reason. ``email.sent``, ``email.scheduled``
and unknown types map to ``None`` and are counted as ignored."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from tidings.providers._fields import history_detail, text, uuid_or_none
from tidings.providers.resend.adapter import DELIVERY_TAG
from tidings.states import FailureKind, Status
from tidings.store.tracking import DeliveryKey, Failure, Tracked
from tidings.tracking.user_agents import provider_open

_Mapped = tuple[str, Status | None, str | None]  # history kind, status, suppression reason

_RESEND: dict[str, _Mapped] = {
    "email.delivered": ("delivered", Status.DELIVERED, None),
    "email.delivery_delayed": ("deferred", None, None),
    "email.complained": ("complained", None, "complaint"),
    "email.opened": ("opened", None, None),
    "email.clicked": ("clicked", None, None),
    # Resend did not send: the address is on its suppression list (an earlier hard bounce
    # or complaint), or the send failed there.
    "email.suppressed": ("dropped", Status.FAILED, "dropped"),
    "email.failed": ("failed", Status.FAILED, None),
}
_HARD_BOUNCE: _Mapped = ("bounced", Status.BOUNCED, "hard_bounce")
_SOFT_BOUNCE: _Mapped = ("soft_bounced", None, None)


def resend_event(event: Mapping[str, Any], event_id: str | None, now: datetime) -> Tracked | None:
    """One webhook event (``event_id``: its svix-id); None when tidings does not record it."""
    data = event.get("data")
    if not isinstance(data, Mapping):
        return None
    mapped = _mapping(event.get("type"), data)
    if mapped is None:
        return None
    kind, status, suppress = mapped
    detail = _detail(data)
    if kind == "opened":
        detail |= provider_open(_nested(data, "open", "userAgent"))
    failure = None
    if status is Status.FAILED:
        failure = Failure(FailureKind.PERMANENT, f"resend {event.get('type')}")
    return Tracked(
        key=DeliveryKey(uuid_or_none(_tag(data.get("tags"))), text(data.get("email_id"))),
        kind=kind,
        at=_iso(event.get("created_at"), now),
        event_id=f"svix:{event_id}" if event_id else None,
        status=status,
        suppress=suppress,
        detail=detail,
        failure=failure,
    )


def _mapping(name: Any, data: Mapping[str, Any]) -> _Mapped | None:
    if name == "email.bounced":
        # Permanent is a hard bounce; Transient and Undetermined leave the address be.
        permanent = _nested(data, "bounce", "type") == "Permanent"
        return _HARD_BOUNCE if permanent else _SOFT_BOUNCE
    return _RESEND.get(name) if isinstance(name, str) else None


def _tag(tags: Any) -> Any:
    """Our delivery id among the event's tags: an object of name -> value, or a list of
    ``{name, value}`` as sent."""
    if isinstance(tags, Mapping):
        return tags.get(DELIVERY_TAG)
    if isinstance(tags, list):
        for tag in tags:
            if isinstance(tag, Mapping) and tag.get("name") == DELIVERY_TAG:
                return tag.get("value")
    return None


def _nested(data: Mapping[str, Any], outer: str, inner: str) -> Any:
    found = data.get(outer)
    return found.get(inner) if isinstance(found, Mapping) else None


def _detail(data: Mapping[str, Any]) -> dict[str, Any]:
    detail: dict[str, Any] = {}
    for part in ("bounce", "click", "failed"):
        found = data.get(part)
        if isinstance(found, Mapping):
            names = ("type", "subType", "message", "link", "reason")
            detail |= history_detail(found, names)
    if "link" in detail:
        detail["url"] = detail.pop("link")
    return detail


def _iso(value: Any, now: datetime) -> datetime:
    """Resend's ISO 8601 time (``2024-02-22T23:41:12.126Z``); ``now`` when unreadable."""
    if not isinstance(value, str) or len(value) > 64:
        return now
    try:
        moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return now
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
