"""What an Amazon SES notification means for tidings: pure mapping, no I/O.

SES publishes to SNS in two forms, both handled: identity notifications (``notificationType``
Bounce, Complaint, Delivery) and configuration-set event publishing (``eventType``, which
adds Open, Click, DeliveryDelay, Reject, Send... and the message's tags in ``mail.tags``).
As the SES developer guide's "notification contents" and "event publishing" pages describe
them: ``mail.messageId`` is the MessageId SendEmail answered; ``bounce.bounceType`` is
``Permanent``, ``Transient`` or ``Undetermined``; ``complaint.complaintFeedbackType`` is an
ARF feedback type such as ``abuse`` or ``not-spam``.

A delivery is found by the ``tidings_delivery_id`` tag (event publishing only), else by the
message id. The event id that dedupes repeats is the bounce's or complaint's
``feedbackId`` (the same when both forms are published), one delivery per message, else
the SNS MessageId (an SNS retry repeats it).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from tidings.providers._fields import text, uuid_or_none
from tidings.states import FailureKind, Status
from tidings.store.tracking import DeliveryKey, Failure, Tracked

DELIVERY_TAG = "tidings_delivery_id"
# Recorded in the history, nothing more (a click's link is kept, never the address).
_RECORDED = {"Open": "opened", "Click": "clicked", "DeliveryDelay": "deferred"}


def ses_event(event: Mapping[str, Any], sns_message_id: str, now: datetime) -> Tracked | None:
    """One SES notification; None when it is not one tidings records."""
    name = event.get("eventType") or event.get("notificationType")
    mail = _object(event.get("mail"))
    key = DeliveryKey(_delivery_id(mail), text(mail.get("messageId")))
    if name == "Bounce":
        return _bounce(key, _object(event.get("bounce")), sns_message_id, now)
    if name == "Complaint":
        return _complaint(key, _object(event.get("complaint")), sns_message_id, now)
    if name == "Delivery":
        delivery = _object(event.get("delivery"))
        detail = _detail(response=delivery.get("smtpResponse"))
        at = _time(delivery.get("timestamp"), now)
        event_id = f"delivery:{key.provider_msg_id}" if key.provider_msg_id else sns_message_id
        return Tracked(key, "delivered", at, event_id, Status.DELIVERED, detail=detail)
    if name == "Reject":
        reason = text(_object(event.get("reject")).get("reason")) or ""
        failure = Failure(FailureKind.PERMANENT, f"ses rejected: {reason}")
        detail = _detail(reason=reason)
        return Tracked(key, "rejected", now, sns_message_id, Status.FAILED, None, detail, failure)
    if isinstance(name, str) and name in _RECORDED:
        return _recorded(key, name, event, sns_message_id, now)
    return None


def sent_at(event: Mapping[str, Any]) -> datetime | None:
    """When SES accepted the message the event is about (``mail.timestamp``)."""
    return _parse_time(_object(event.get("mail")).get("timestamp"))


def _bounce(
    key: DeliveryKey, bounce: Mapping[str, Any], sns_message_id: str, now: datetime
) -> Tracked:
    recipients = bounce.get("bouncedRecipients")
    first = _object(recipients[0]) if isinstance(recipients, list) and recipients else {}
    detail = _detail(
        type=bounce.get("bounceType"),
        subtype=bounce.get("bounceSubType"),
        status=first.get("status"),
        reason=first.get("diagnosticCode"),
    )
    at = _time(bounce.get("timestamp"), now)
    event_id = _feedback_id(bounce) or sns_message_id
    if bounce.get("bounceType") == "Permanent":
        return Tracked(key, "bounced", at, event_id, Status.BOUNCED, "hard_bounce", detail)
    # Transient (a full mailbox, a message too large) or Undetermined: the address may work.
    return Tracked(key, "soft_bounced", at, event_id, detail=detail)


def _complaint(
    key: DeliveryKey, complaint: Mapping[str, Any], sns_message_id: str, now: datetime
) -> Tracked:
    feedback = complaint.get("complaintFeedbackType")
    detail = _detail(type=feedback, subtype=complaint.get("complaintSubType"))
    # "not-spam": the recipient said the opposite of a complaint.
    suppress = None if feedback == "not-spam" else "complaint"
    at = _time(complaint.get("timestamp"), now)
    event_id = _feedback_id(complaint) or sns_message_id
    return Tracked(key, "complained", at, event_id, suppress=suppress, detail=detail)


def _recorded(
    key: DeliveryKey, name: str, event: Mapping[str, Any], sns_message_id: str, now: datetime
) -> Tracked:
    body = _object(event.get(name[0].lower() + name[1:]))  # "DeliveryDelay" -> deliveryDelay
    detail = _detail(url=body.get("link"), reason=body.get("delayType"))
    return Tracked(
        key, _RECORDED[name], _time(body.get("timestamp"), now), sns_message_id, None, detail=detail
    )


def _feedback_id(item: Mapping[str, Any]) -> str | None:
    feedback = text(item.get("feedbackId"))
    return f"feedback:{feedback}"[:255] if feedback else None


def _delivery_id(mail: Mapping[str, Any]) -> uuid.UUID | None:
    tags = _object(mail.get("tags")).get(DELIVERY_TAG)
    return uuid_or_none(tags[0] if isinstance(tags, list) and tags else None)


def _detail(**fields: Any) -> dict[str, Any]:
    return {
        name: value[:1000] for name, value in fields.items() if isinstance(value, str) and value
    }


def _time(value: Any, now: datetime) -> datetime:
    return _parse_time(value) or now


def _parse_time(value: Any) -> datetime | None:
    """An ISO 8601 timestamp (SES writes ``2016-01-27T14:59:38.237Z``), else None."""
    if not isinstance(value, str) or len(value) > 40:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _object(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}
