"""Amazon SES notifications through SNS: ``POST /v1/webhooks/ses/{account}``.

SES publishes bounces, complaints and deliveries to an SNS topic, and SNS POSTs each
message (JSON, whatever its Content-Type) to this HTTPS endpoint. Every message is checked
before anything is done with it: its ``TopicArn`` must be one of the account's
``sns_topic_arns`` (anyone can subscribe this URL to a topic of theirs, and SNS signs those
too), its ``SigningCertURL`` must be SNS's own host in the topic's region, and its signature
must verify with that certificate (``sns_signature.py``). Then a
``SubscriptionConfirmation`` is confirmed by a GET of its ``SubscribeURL`` (SNS's host
again), a ``Notification`` carries the SES event in ``Message``
(``events.py``), written by ``tidings.store.tracking`` in one
transaction, and an ``UnsubscribeConfirmation`` is acknowledged.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from tidings.clock import utcnow
from tidings.providers._fields import json_object
from tidings.providers.receivers import Answer, Callback, Refused, counts
from tidings.providers.ses.account import SesAccount
from tidings.providers.ses.events import sent_at, ses_event
from tidings.providers.ses.sns_fetch import CertificateCache, FetchFailed, confirm_subscription
from tidings.providers.ses.sns_signature import (
    signature_valid,
    string_to_sign,
    topic_region,
    trusted_url,
)
from tidings.store import tracking, tracking_targets
from tidings.store.engine import Database

log = logging.getLogger(__name__)
# Shared by every account and request: SNS signs with few certificates.
CERTIFICATES = CertificateCache()
# An unmatched event about a message SES accepted this recently may be ours, its send's
# outcome not written yet: SNS is asked to retry it (its retries span about a minute).
RECENT = timedelta(minutes=5)
RETRY_SECONDS = 20


class SesReceiver:
    kind = "ses"
    title = "SES"
    account_type = SesAccount
    hooks = frozenset({""})

    def unconfigured(self, account: SesAccount) -> Refused | None:
        if account.sns_topic_arns:
            return None
        return Refused(
            403,
            "webhook_not_configured",
            "set sns_topic_arns on the account: notifications are accepted only from the "
            "SNS topics SES publishes to",
        )

    async def verify(self, call: Callback, account: SesAccount) -> dict[str, Any] | Refused:
        """An SNS message, signed by SNS, for a topic of this account."""
        message = json_object(call.body)
        if message is None or string_to_sign(message) is None:
            return Refused(400, "invalid_request", "the body must be an SNS message")
        topic = message["TopicArn"]
        region = topic_region(topic)
        if topic not in account.sns_topic_arns or region is None:
            return Refused(403, "unknown_topic", f"not a topic of this account: {topic!r}")
        url = message.get("SigningCertURL")
        if not trusted_url(url, region, account.sns_trusted_origins):
            return Refused(
                401, "invalid_signature", f"SigningCertURL is not SNS's host in {region}"
            )
        try:
            certificate = await CERTIFICATES.get(str(url))
        except FetchFailed as error:
            log.warning("SNS signing certificate unavailable: %s", error)
            return Refused(502, "certificate_unavailable", "cannot fetch SigningCertURL")
        if not signature_valid(message, certificate, utcnow()):
            return Refused(401, "invalid_signature", "bad SNS message signature")
        return message

    async def accept(
        self, verified: dict[str, Any], call: Callback, account: SesAccount, db: Database
    ) -> Answer | Refused:
        """A subscription to confirm, or an SES bounce, complaint or delivery notification."""
        if verified["Type"] == "SubscriptionConfirmation":
            return await _confirm(verified, account)
        if verified["Type"] == "UnsubscribeConfirmation":
            log.warning(
                "SNS unsubscribed SES account %r from %s", call.account, verified["TopicArn"]
            )
            return counts(1, tracking.Applied(0, 0, 0), ignored=1)
        return await _notification(db, call.account, verified)


async def _confirm(message: dict[str, Any], account: SesAccount) -> Answer | Refused:
    url = message.get("SubscribeURL")
    region = topic_region(message["TopicArn"]) or ""
    if not trusted_url(url, region, account.sns_trusted_origins):
        return Refused(400, "invalid_request", f"SubscribeURL is not SNS's host in {region}")
    try:
        await confirm_subscription(str(url))
    except FetchFailed as error:
        log.warning("SNS subscription not confirmed: %s", error)
        return Refused(502, "confirmation_failed", "SNS refused the confirmation")
    log.info("SNS subscription to %s confirmed", message["TopicArn"])
    return Answer({"confirmed": True, "topicArn": message["TopicArn"]})


async def _notification(db: Database, account: str, message: dict[str, Any]) -> Answer | Refused:
    now = utcnow()
    event = json_object(message["Message"].encode())
    # A signed message that is no SES event (a test publish from the console): acknowledged,
    # so that SNS does not retry it.
    item = ses_event(event, message["MessageId"], now) if event is not None else None
    if item is not None and event is not None and await _too_early(db, account, item, event):
        # SNS retries a 5xx (20 s later, three times by default): by then the send's
        # outcome is written. Nothing is recorded, so the retry is not a duplicate.
        return Refused(
            503,
            "not_yet_sent",
            "the delivery's send is not recorded yet; retry",
            headers={"Retry-After": str(RETRY_SECONDS)},
        )
    applied = await tracking.apply(db, account, "email", [item] if item else [], now)
    return counts(1, applied, ignored=(0 if item else 1) + applied.ignored)


async def _too_early(
    db: Database, account: str, item: tracking.Tracked, event: dict[str, Any]
) -> bool:
    """The event outran the outcome of its send: the delivery is still being sent, or no
    delivery has its message id yet although SES accepted the message moments ago."""
    sending = await tracking_targets.in_progress(db, account, "email", item.key)
    if sending is not None:
        return sending
    accepted = sent_at(event)
    return accepted is not None and utcnow() - accepted < RECENT
