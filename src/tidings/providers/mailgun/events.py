"""What a Mailgun webhook event means for tidings: pure mapping, no I/O.

Each ``event-data`` becomes one ``Tracked``: how to find its delivery (our id from the
custom variable tidings sent, else Mailgun's message id), the status it moves to, the
history kind, the suppression reason. Events tidings does not record map to ``None`` and
are counted as ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from tidings.providers._fields import history_detail, text, unix_time, uuid_or_none
from tidings.providers.mailgun.adapter import DELIVERY_VARIABLE
from tidings.states import Status
from tidings.store.tracking import DeliveryKey, Tracked
from tidings.tracking.user_agents import provider_open

_Mapped = tuple[str, Status | None, str | None]  # history kind, status, suppression reason

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
    event_id = text(data.get("id"))
    detail = history_detail(data, _MAILGUN_DETAIL)
    delivery_status = data.get("delivery-status")
    if isinstance(delivery_status, Mapping):
        detail |= history_detail(delivery_status, _MAILGUN_STATUS_DETAIL)
    if event_id:
        detail["event_id"] = event_id
    if kind == "opened":
        client = data.get("client-info")
        detail |= provider_open(client.get("user-agent") if isinstance(client, Mapping) else None)
    variables = data.get("user-variables")
    ours = variables.get(DELIVERY_VARIABLE) if isinstance(variables, Mapping) else None
    return Tracked(
        key=DeliveryKey(uuid_or_none(ours), _mailgun_message_id(data)),
        kind=kind,
        at=unix_time(data.get("timestamp"), now),
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
    return text(value.strip().strip("<>")) if isinstance(value, str) else None


# --- Postmark: one record per POST, by RecordType --------------------------------------------
