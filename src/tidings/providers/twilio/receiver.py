"""Provider event webhooks: POST /v1/webhooks/sendgrid/{account}, /twilio/{account} (status
callbacks) and /twilio/{account}/inbound (replies to the account's number).

``account`` is the name of a provider account in the settings; its credentials verify the
request (SendGrid: the Event Webhook's ECDSA signature and a +-5 minute timestamp; Twilio:
``X-Twilio-Signature``, HMAC with the auth token over the URL and form). Nothing unsigned
is ever accepted. What each event does is decided in ``tidings.tracking.events`` and written
in one transaction by ``tidings.store.tracking``.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any
from urllib.parse import parse_qsl

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from tidings.api.auth import PUBLIC
from tidings.api.deps import service_of
from tidings.api.errors import error_response
from tidings.api.schemas import ErrorResponse
from tidings.clock import utcnow
from tidings.providers.sendgrid import SendGridAccount
from tidings.providers.twilio import DELIVERY_PARAM, TwilioAccount
from tidings.service import Service
from tidings.store import tracking
from tidings.store.tracking import Tracked
from tidings.tracking import inbound
from tidings.tracking.events import sendgrid_event, twilio_callback
from tidings.tracking.sendgrid_webhook import EventWebhookVerifier
from tidings.tracking.twilio_signature import (
    SETTINGS_HEADER,
    SIGNATURE_HEADER,
    algorithm_from_settings,
    verify_signature,
)

router = APIRouter(prefix="/v1/webhooks", tags=["webhooks"], dependencies=PUBLIC)
_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorResponse} for code in (400, 401, 403, 404, 413)
}


@functools.lru_cache(maxsize=32)
def _verifier(public_key: str) -> EventWebhookVerifier:
    """Parsing the key costs more than verifying; settings may change, so cache by key."""
    return EventWebhookVerifier(public_key)


@router.post("/sendgrid/{account}", responses=_ERRORS)
async def sendgrid_events(request: Request, account: str) -> Response:
    """SendGrid's Event Webhook (a JSON array of events), signed with the account's key."""
    service = service_of(request)
    settings = service.settings.accounts.get(account)
    if not isinstance(settings, SendGridAccount):
        return error_response(404, "not_found", f"no SendGrid account {account!r}")
    if not settings.event_webhook_public_key:
        return error_response(
            403,
            "webhook_not_configured",
            "signed webhooks must be configured: set event_webhook_public_key on the account "
            "(SendGrid's signed Event Webhook verification key)",
        )
    body = await request.body()
    if not _verifier(settings.event_webhook_public_key).verify_headers(body, request.headers):
        return error_response(401, "invalid_signature", "bad or stale Event Webhook signature")
    events = _json_events(body)
    if events is None:
        return error_response(400, "invalid_request", "the body must be a JSON array of events")
    now = utcnow()
    tracked = [item for event in events if (item := sendgrid_event(event, now))]
    return await _apply(service, account, "email", tracked, len(events), now)


@router.post("/twilio/{account}", responses=_ERRORS)
async def twilio_status(request: Request, account: str) -> Response:
    """A Twilio status callback (form-encoded), signed with the account's auth token."""
    service = service_of(request)
    form = await _signed_twilio_form(request, service, account)
    if isinstance(form, Response):
        return form
    now = utcnow()
    item = twilio_callback(form, now, request.query_params.get(DELIVERY_PARAM))
    return await _apply(service, account, "sms", [item] if item else [], 1, now)


@router.post("/twilio/{account}/inbound", responses=_ERRORS)
async def twilio_inbound(request: Request, account: str) -> Response:
    """A reply to the account's number (its messaging webhook): STOP and its synonyms
    suppress the sender's number, START and UNSTOP lift that suppression (carrier rules);
    anything else is acknowledged. Answers empty TwiML: tidings sends no reply itself."""
    service = service_of(request)
    form = await _signed_twilio_form(request, service, account)
    if isinstance(form, Response):
        return form
    await inbound.apply_reply(service.db, account, form, utcnow())
    return Response(inbound.EMPTY_TWIML, media_type="text/xml")


async def _signed_twilio_form(
    request: Request, service: Service, account: str
) -> dict[str, str] | Response:
    """The form of a request Twilio signed for ``account``, or the refusal to answer."""
    settings = service.settings.accounts.get(account)
    if not isinstance(settings, TwilioAccount):
        return error_response(404, "not_found", f"no Twilio account {account!r}")
    if settings.auth_token is None:
        return error_response(
            403,
            "webhook_not_configured",
            "Twilio signs its webhooks with the account's auth token: set auth_token on the "
            "account to accept them",
        )
    form = _form(await request.body())
    if form is None:
        return error_response(400, "invalid_request", "the body must be a UTF-8 form")
    url = public_request_url(service.settings.public_url, request)
    signature = request.headers.get(SIGNATURE_HEADER)
    algorithm = algorithm_from_settings(request.headers.get(SETTINGS_HEADER))
    token = settings.auth_token.get_secret_value()
    if not verify_signature(token, url, form, signature, algorithm):
        return error_response(401, "invalid_signature", "bad X-Twilio-Signature")
    return {name: values[0] for name, values in form.items()}


def public_request_url(public_url: str, request: Request) -> str:
    """The URL the provider called: ``public_url`` (scheme, host and any prefix a proxy
    strips) + the path as sent, percent-encoding and query string untouched."""
    raw_path = request.scope.get("raw_path")
    path = raw_path.decode("latin-1") if raw_path else request.url.path
    query = request.scope.get("query_string", b"").decode("latin-1")
    return public_url.rstrip("/") + path + (f"?{query}" if query else "")


async def _apply(
    service: Service,
    account: str,
    channel: str,
    items: Sequence[Tracked],
    received: int,
    now: datetime,
) -> JSONResponse:
    applied = await tracking.apply(service.db, account, channel, items, now)
    return JSONResponse(
        {
            "received": received,
            "applied": applied.applied,
            "duplicates": applied.duplicates,
            "unmatched": applied.unmatched,
            "ignored": received - len(items) + applied.ignored,
        }
    )


def _json_events(body: bytes) -> list[dict[str, Any]] | None:
    try:
        events = json.loads(body)
    except ValueError:
        return None
    if not isinstance(events, list) or not all(isinstance(e, dict) for e in events):
        return None
    return events


def _form(body: bytes) -> dict[str, list[str]] | None:
    """The form's fields, each with its values (parsed here: no python-multipart)."""
    try:
        pairs = parse_qsl(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False)
    except (UnicodeDecodeError, ValueError):
        return None
    form: dict[str, list[str]] = {}
    for name, value in pairs:
        form.setdefault(name, []).append(value)
    return form
