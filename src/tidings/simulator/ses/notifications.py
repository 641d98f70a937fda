"""What the simulated SES reports after accepting an email: bounce, complaint and delivery
notifications, published to its SNS topic.

As the SES developer guide's "Amazon SNS notification contents" describes them: a JSON
object with ``notificationType`` (``Bounce``, ``Complaint``, ``Delivery``) and ``mail`` (the
``messageId`` SendEmail answered, ``source``, ``destination``, ``timestamp``), plus a
``bounce`` (``bounceType`` Permanent or Transient, ``bounceSubType``, ``bouncedRecipients``
with ``status`` and ``diagnosticCode``, ``feedbackId``), ``complaint``
(``complaintFeedbackType``, ``complainedRecipients``, ``feedbackId``) or ``delivery``
(``smtpResponse``, ``recipients``). A message sent with a configuration set is reported as
event publishing does instead: ``eventType`` and the message's tags in ``mail.tags``.

The outcome is drawn from the behaviour's ``reports`` (``bounce``, ``soft_bounce``,
``complaint``; the rest delivered). Like SES, the simulator keeps an account-level
suppression list: an address that bounced or complained is not mailed again, and a later
send is accepted, then bounced with ``bounceSubType`` ``OnAccountSuppressionList``.
"""

from __future__ import annotations

import datetime
import secrets
from typing import Any

from tidings.simulator.behaviour import ProviderState
from tidings.simulator.ses.sns import SnsTopic

_BOUNCES: dict[str, dict[str, str]] = {
    "bounce": {
        "bounceType": "Permanent",
        "bounceSubType": "General",
        "status": "5.1.1",
        "diagnosticCode": "smtp; 550 5.1.1 user unknown",
        "action": "failed",
    },
    "soft_bounce": {
        "bounceType": "Transient",
        "bounceSubType": "MailboxFull",
        "status": "4.2.2",
        "diagnosticCode": "smtp; 452 4.2.2 mailbox full",
        "action": "failed",
    },
    "suppressed": {
        "bounceType": "Permanent",
        "bounceSubType": "OnAccountSuppressionList",
        "status": "5.1.1",
        "diagnosticCode": "Amazon SES did not send the message to this address because it "
        "is on the suppression list for your account.",
        "action": "failed",
    },
}


class SesNotifications:
    def __init__(self, state: ProviderState, topic: SnsTopic) -> None:
        self.state = state
        self.topic = topic
        self.suppressed: dict[str, str] = {}  # address -> BOUNCE or COMPLAINT, as SES says

    def accepted(self, address: str, message_id: str, body: dict[str, Any]) -> None:
        """Publish what becomes of one accepted email."""
        mail = _mail(address, message_id, body)
        event_publishing = bool(body.get("ConfigurationSetName"))
        if address.lower() in self.suppressed:
            self.state.reports.append((address, "suppressed"))
            self._publish("Bounce", mail, _bounce(address, "suppressed"), event_publishing)
            return
        outcome = self.state.report_outcome(address)
        if outcome in ("bounce", "soft_bounce"):
            if outcome == "bounce":
                self.suppressed[address.lower()] = "BOUNCE"
            self._publish("Bounce", mail, _bounce(address, outcome), event_publishing)
            return
        delivery = {
            "timestamp": _now(),
            "processingTimeMillis": 512,
            "recipients": [address],
            "smtpResponse": "250 2.6.0 Message received",
            "reportingMTA": "a8-70.smtp-out.amazonses.com",
        }
        self._publish("Delivery", mail, delivery, event_publishing)
        if outcome == "complaint":
            self.suppressed[address.lower()] = "COMPLAINT"
            self._publish("Complaint", mail, _complaint(address), event_publishing)

    def _publish(
        self, kind: str, mail: dict[str, Any], detail: dict[str, Any], event_publishing: bool
    ) -> None:
        name = "eventType" if event_publishing else "notificationType"
        if not event_publishing:
            mail = {k: v for k, v in mail.items() if k != "tags"}
        self.topic.publish({name: kind, "mail": mail, kind[0].lower() + kind[1:]: detail})


def _mail(address: str, message_id: str, body: dict[str, Any]) -> dict[str, Any]:
    tags: dict[str, list[str]] = {}
    for tag in body.get("EmailTags") or []:
        if isinstance(tag, dict):
            tags.setdefault(str(tag.get("Name")), []).append(str(tag.get("Value")))
    return {
        "timestamp": _now(),
        "messageId": message_id,
        "source": str(body.get("FromEmailAddress")),
        "sendingAccountId": "123456789012",
        "destination": [address],
        "tags": tags,
    }


def _bounce(address: str, outcome: str) -> dict[str, Any]:
    shape = _BOUNCES[outcome]
    recipient = {
        "emailAddress": address,
        "action": shape["action"],
        "status": shape["status"],
        "diagnosticCode": shape["diagnosticCode"],
    }
    return {
        "bounceType": shape["bounceType"],
        "bounceSubType": shape["bounceSubType"],
        "bouncedRecipients": [recipient],
        "timestamp": _now(),
        "feedbackId": _feedback_id(),
        "reportingMTA": "dsn; a8-70.smtp-out.amazonses.com",
    }


def _complaint(address: str) -> dict[str, Any]:
    return {
        "complainedRecipients": [{"emailAddress": address}],
        "timestamp": _now(),
        "feedbackId": _feedback_id(),
        "complaintFeedbackType": "abuse",
        "userAgent": "simulated-mailbox-provider/1.0",
    }


def _feedback_id() -> str:
    return f"0100{secrets.token_hex(6)}-{secrets.token_hex(4)}-{secrets.token_hex(2)}-000000"


def _now() -> str:
    moment = datetime.datetime.now(datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
