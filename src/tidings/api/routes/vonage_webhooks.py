"""Vonage message status webhooks: ``POST /v1/webhooks/vonage/{account}``.

``account`` names a Vonage account in the settings; its ``signature_secret`` verifies the
request (``tidings.tracking.vonage_signature``: an HS256 JWT whose ``payload_hash`` is the
body's SHA-256, issued within five minutes). Nothing unsigned is accepted. The mapping is
``tidings.tracking.vonage_events``; the store writes it in one transaction.
"""

from __future__ import annotations

import json
import time
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from tidings.api.auth import PUBLIC
from tidings.api.deps import service_of
from tidings.api.errors import error_response
from tidings.api.schemas import ErrorResponse
from tidings.clock import utcnow
from tidings.providers.vonage import VonageAccount
from tidings.store import tracking
from tidings.tracking.vonage_events import vonage_status
from tidings.tracking.vonage_signature import verify

router = APIRouter(prefix="/v1/webhooks", tags=["webhooks"], dependencies=PUBLIC)
_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorResponse} for code in (400, 401, 403, 404, 413)
}


@router.post("/vonage/{account}", responses=_ERRORS)
async def vonage_status_webhook(request: Request, account: str) -> Response:
    """A Messages API status webhook (JSON), signed with the account's signature secret."""
    service = service_of(request)
    settings = service.settings.accounts.get(account)
    if not isinstance(settings, VonageAccount):
        return error_response(404, "not_found", f"no Vonage account {account!r}")
    if settings.signature_secret is None:
        return error_response(
            403,
            "webhook_not_configured",
            "signed webhooks must be configured: set signature_secret on the account "
            "(the signature secret of the Vonage API key)",
        )
    body = await request.body()
    secret = settings.signature_secret.get_secret_value()
    if not verify(secret, request.headers.get("authorization"), body, time.time()):
        return error_response(401, "invalid_signature", "bad or stale Vonage webhook signature")
    event = _json_object(body)
    if event is None:
        return error_response(400, "invalid_request", "the body must be a JSON object")
    now = utcnow()
    item = vonage_status(event, now)
    applied = await tracking.apply(service.db, account, "sms", [item] if item else [], now)
    return JSONResponse(
        {
            "received": 1,
            "applied": applied.applied,
            "duplicates": applied.duplicates,
            "unmatched": applied.unmatched,
            "ignored": (0 if item else 1) + applied.ignored,
        }
    )


def _json_object(body: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(body)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
