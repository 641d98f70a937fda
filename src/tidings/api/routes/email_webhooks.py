"""Email provider event webhooks: ``POST /v1/webhooks/mailgun/{account}`` and
``POST /v1/webhooks/postmark/{account}``.

``account`` names a provider account in the settings. Mailgun signs each request
(``tidings.tracking.mailgun_signature``: HMAC of timestamp + token with the account's
webhook signing key, five minutes of tolerance, and a token accepted once:
``tidings.store.webhook_tokens``). Postmark does not sign: its webhook URL carries HTTP
Basic credentials, which must be the account's. Nothing unauthenticated is ever accepted.
The mapping is ``tidings.tracking.email_events``; the store writes it in one transaction.

Mailgun retries any answer but 200 and 406 ("rejected, do not retry") for hours: a replayed
token or an unusable event that is correctly signed is answered 406; a bad signature is 401
(a request that did not come from Mailgun has no retry to stop).
"""

from __future__ import annotations

import json
import logging
from datetime import datetime
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from tidings.api.auth import PUBLIC
from tidings.api.deps import service_of
from tidings.api.errors import error_response
from tidings.api.schemas import ErrorResponse
from tidings.clock import utcnow
from tidings.providers.mailgun import MailgunAccount
from tidings.providers.postmark import PostmarkAccount
from tidings.service import Service
from tidings.store import tracking, webhook_tokens
from tidings.store.tracking import Tracked
from tidings.tracking import basic_auth, mailgun_signature
from tidings.tracking.email_events import mailgun_event, postmark_event

log = logging.getLogger(__name__)
router = APIRouter(prefix="/v1/webhooks", tags=["webhooks"], dependencies=PUBLIC)
_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorResponse} for code in (400, 401, 403, 404, 406, 413)
}
# Mailgun's "rejected: do not retry".
REJECTED = 406


@router.post("/mailgun/{account}", responses=_ERRORS)
async def mailgun_events(request: Request, account: str) -> Response:
    """One Mailgun event (``{"signature", "event-data"}``), signed with the account's key."""
    service = service_of(request)
    settings = service.settings.accounts.get(account)
    if not isinstance(settings, MailgunAccount):
        return error_response(404, "not_found", f"no Mailgun account {account!r}")
    if settings.webhook_signing_key is None:
        return error_response(
            403,
            "webhook_not_configured",
            "signed webhooks must be configured: set webhook_signing_key on the account "
            "(Mailgun's HTTP webhook signing key)",
        )
    body = _json_object(await request.body())
    if body is None:
        return error_response(400, "invalid_request", "the body must be a JSON object")
    now = utcnow()
    key = settings.webhook_signing_key.get_secret_value()
    why = mailgun_signature.refusal(key, body.get("signature"), now.timestamp())
    if why is not None:
        return error_response(401, "invalid_signature", f"Mailgun signature refused: {why}")
    data = body.get("event-data")
    if not isinstance(data, dict):
        return error_response(REJECTED, "invalid_request", "event-data must be a JSON object")
    token = str(body["signature"]["token"])
    if not await webhook_tokens.first_use(service.db, account, token, now):
        return error_response(REJECTED, "replayed", "this signature was already accepted")
    item = mailgun_event(data, now)
    try:
        return await _apply(service, account, [item] if item else [], now)
    except Exception:
        await _forget(service, account, token)  # so that Mailgun's retry is not a "replay"
        raise


@router.post("/postmark/{account}", responses=_ERRORS)
async def postmark_events(request: Request, account: str) -> Response:
    """One Postmark webhook record (Delivery, Bounce, SpamComplaint, SubscriptionChange,
    Open, Click), authenticated by the Basic credentials of the account's webhook URL."""
    service = service_of(request)
    settings = service.settings.accounts.get(account)
    if not isinstance(settings, PostmarkAccount):
        return error_response(404, "not_found", f"no Postmark account {account!r}")
    if settings.webhook_username is None or settings.webhook_password is None:
        return error_response(
            403,
            "webhook_not_configured",
            "Postmark webhooks must carry credentials: set webhook_username and "
            "webhook_password on the account, and put them in the webhook URL at Postmark",
        )
    password = settings.webhook_password.get_secret_value()
    if not basic_auth.matches(
        request.headers.get("authorization"), settings.webhook_username, password
    ):
        return error_response(
            401,
            "invalid_credentials",
            "missing or wrong Basic credentials",
            headers={"WWW-Authenticate": 'Basic realm="tidings webhooks"'},
        )
    record = _json_object(await request.body())
    if record is None:
        return error_response(400, "invalid_request", "the body must be a JSON object")
    now = utcnow()
    item = postmark_event(record, now)
    return await _apply(service, account, [item] if item else [], now)


async def _apply(
    service: Service, account: str, items: list[Tracked], now: datetime
) -> JSONResponse:
    """Write one request's events; answer their counts (as the other webhook routes do)."""
    applied = await tracking.apply(service.db, account, "email", items, now)
    return JSONResponse(
        {
            "received": 1,
            "applied": applied.applied,
            "duplicates": applied.duplicates,
            "unmatched": applied.unmatched,
            "ignored": 1 - len(items) + applied.ignored,
        }
    )


async def _forget(service: Service, account: str, token: str) -> None:
    try:
        await webhook_tokens.forget(service.db, account, token)
    except Exception:  # the database that failed the apply may fail this too
        log.warning("could not release a Mailgun webhook token of %s", account, exc_info=True)


def _json_object(body: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(body)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
