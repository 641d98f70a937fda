"""Amazon SES notifications through SNS: POST /v1/webhooks/ses/{account}.

SES publishes bounces, complaints and deliveries to an SNS topic, and SNS POSTs each
message (JSON, whatever its Content-Type) to this HTTPS endpoint. Every message is checked
before anything is done with it: its ``TopicArn`` must be one of the account's
``sns_topic_arns`` (anyone can subscribe this URL to a topic of theirs, and SNS signs those
too), its ``SigningCertURL`` must be SNS's own host in the topic's region, and its signature
must verify with that certificate (``tidings.tracking.sns_signature``). Then a
``SubscriptionConfirmation`` is confirmed by a GET of its ``SubscribeURL`` (SNS's host
again), a ``Notification`` carries the SES event in ``Message``
(``tidings.tracking.ses_events``), written by ``tidings.store.tracking`` in one
transaction, and an ``UnsubscribeConfirmation`` is acknowledged.
"""

from __future__ import annotations

import json
import logging
from datetime import timedelta
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from tidings.api.auth import PUBLIC
from tidings.api.deps import service_of
from tidings.api.errors import error_response
from tidings.api.schemas import ErrorResponse
from tidings.clock import utcnow
from tidings.providers.ses import SesAccount
from tidings.service import Service
from tidings.store import tracking, tracking_targets
from tidings.tracking.ses_events import sent_at, ses_event
from tidings.tracking.sns_fetch import CertificateCache, FetchFailed, confirm_subscription
from tidings.tracking.sns_signature import (
    signature_valid,
    string_to_sign,
    topic_region,
    trusted_url,
)

log = logging.getLogger(__name__)
router = APIRouter(prefix="/v1/webhooks", tags=["webhooks"], dependencies=PUBLIC)
_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorResponse} for code in (400, 401, 403, 404, 413, 502, 503)
}
# Shared by every account and request: SNS signs with few certificates.
CERTIFICATES = CertificateCache()
# An unmatched event about a message SES accepted this recently may be ours, its send's
# outcome not written yet: SNS is asked to retry it (its retries span about a minute).
RECENT = timedelta(minutes=5)
RETRY_SECONDS = 20


@router.post("/ses/{account}", responses=_ERRORS)
async def ses_notifications(request: Request, account: str) -> Response:
    """An SNS message for the SES account ``account``: a subscription to confirm, or an SES
    bounce, complaint or delivery notification."""
    service = service_of(request)
    settings = service.settings.accounts.get(account)
    if not isinstance(settings, SesAccount):
        return error_response(404, "not_found", f"no SES account {account!r}")
    if not settings.sns_topic_arns:
        return error_response(
            403,
            "webhook_not_configured",
            "set sns_topic_arns on the account: notifications are accepted only from the "
            "SNS topics SES publishes to",
        )
    message = _json_object(await request.body())
    if message is None or string_to_sign(message) is None:
        return error_response(400, "invalid_request", "the body must be an SNS message")
    refusal = await _verify(message, settings)
    if refusal is not None:
        return refusal
    if message["Type"] == "SubscriptionConfirmation":
        return await _confirm(message, settings)
    if message["Type"] == "UnsubscribeConfirmation":
        log.warning("SNS unsubscribed SES account %r from %s", account, message["TopicArn"])
        return _counts(1, tracking.Applied(0, 0, 0), ignored=1)
    return await _notification(service, account, message)


async def _verify(message: dict[str, Any], settings: SesAccount) -> Response | None:
    """The refusal for a message that is not SNS's, for a topic of this account; else None."""
    topic = message["TopicArn"]
    region = topic_region(topic)
    if topic not in settings.sns_topic_arns or region is None:
        return error_response(403, "unknown_topic", f"not a topic of this account: {topic!r}")
    url = message.get("SigningCertURL")
    if not trusted_url(url, region, settings.sns_trusted_origins):
        return error_response(
            401, "invalid_signature", f"SigningCertURL is not SNS's host in {region}"
        )
    try:
        certificate = await CERTIFICATES.get(str(url))
    except FetchFailed as error:
        log.warning("SNS signing certificate unavailable: %s", error)
        return error_response(502, "certificate_unavailable", "cannot fetch SigningCertURL")
    if not signature_valid(message, certificate, utcnow()):
        return error_response(401, "invalid_signature", "bad SNS message signature")
    return None


async def _confirm(message: dict[str, Any], settings: SesAccount) -> Response:
    url = message.get("SubscribeURL")
    region = topic_region(message["TopicArn"]) or ""
    if not trusted_url(url, region, settings.sns_trusted_origins):
        return error_response(400, "invalid_request", f"SubscribeURL is not SNS's host in {region}")
    try:
        await confirm_subscription(str(url))
    except FetchFailed as error:
        log.warning("SNS subscription not confirmed: %s", error)
        return error_response(502, "confirmation_failed", "SNS refused the confirmation")
    log.info("SNS subscription to %s confirmed", message["TopicArn"])
    return JSONResponse({"confirmed": True, "topicArn": message["TopicArn"]})


async def _notification(service: Service, account: str, message: dict[str, Any]) -> Response:
    now = utcnow()
    event = _json_object(message["Message"].encode())
    # A signed message that is no SES event (a test publish from the console): acknowledged,
    # so that SNS does not retry it.
    item = ses_event(event, message["MessageId"], now) if event is not None else None
    if item is not None and event is not None and await _too_early(service, account, item, event):
        # SNS retries a 5xx (20 s later, three times by default): by then the send's
        # outcome is written. Nothing is recorded, so the retry is not a duplicate.
        return error_response(
            503,
            "not_yet_sent",
            "the delivery's send is not recorded yet; retry",
            headers={"Retry-After": str(RETRY_SECONDS)},
        )
    applied = await tracking.apply(service.db, account, "email", [item] if item else [], now)
    return _counts(1, applied, ignored=(0 if item else 1) + applied.ignored)


async def _too_early(
    service: Service, account: str, item: tracking.Tracked, event: dict[str, Any]
) -> bool:
    """The event outran the outcome of its send: the delivery is still being sent, or no
    delivery has its message id yet although SES accepted the message moments ago."""
    sending = await tracking_targets.in_progress(service.db, account, "email", item.key)
    if sending is not None:
        return sending
    accepted = sent_at(event)
    return accepted is not None and utcnow() - accepted < RECENT


def _counts(received: int, applied: tracking.Applied, *, ignored: int) -> JSONResponse:
    return JSONResponse(
        {
            "received": received,
            "applied": applied.applied,
            "duplicates": applied.duplicates,
            "unmatched": applied.unmatched,
            "ignored": ignored,
        }
    )


def _json_object(body: bytes) -> dict[str, Any] | None:
    try:
        found = json.loads(body)
    except (ValueError, RecursionError):  # UnicodeDecodeError included; absurd nesting
        return None
    return found if isinstance(found, dict) else None
