"""Provider callbacks: ``POST /v1/webhooks/{kind}/{account}`` (and ``/{hook}`` below it).

A provider reports on the messages it sent (delivered, bounced, opened, a reply) by calling
this URL; ``kind`` picks the receiver (``tidings.providers.registry``) and ``account`` one
of the settings' accounts of that kind, whose credentials verify the request. Nothing
unauthenticated is ever accepted. This route only translates HTTP: what a callback means
and what it answers is the receiver's (``providers/<kind>/receiver.py``).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from tidings.api.auth import PUBLIC
from tidings.api.deps import service_of
from tidings.api.errors import error_response
from tidings.api.schemas import ErrorResponse
from tidings.providers.receivers import Answer, Callback, Handshake, Refused
from tidings.providers.registry import RECEIVERS

router = APIRouter(prefix="/v1/webhooks", tags=["provider callbacks"], dependencies=PUBLIC)
_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorResponse} for code in (400, 401, 403, 404, 406, 413, 502, 503)
}


@router.post("/{kind}/{account}", responses=_ERRORS)
async def provider_callback(request: Request, kind: str, account: str) -> Response:
    """A provider's callback for one of its accounts: status reports, bounces, opens."""
    return await _receive(request, kind, account, "")


@router.get("/{kind}/{account}", responses=_ERRORS)
async def provider_handshake(request: Request, kind: str, account: str) -> Response:
    """A provider's check of its callback URL before it posts to it (Meta's verification
    request: ``hub.mode``, ``hub.verify_token``, ``hub.challenge``)."""
    receiver = RECEIVERS.get(kind)
    if not isinstance(receiver, Handshake):
        return error_response(404, "not_found", f"no provider handshake {request.url.path!r}")
    settings = service_of(request).settings.accounts.get(account)
    if not isinstance(settings, receiver.account_type):
        return error_response(404, "not_found", f"no {receiver.title} account {account!r}")
    call = Callback(account, "", b"", request.headers, request.query_params, str(request.url))
    answer = await receiver.handshake(call, settings)
    return _refusal(answer) if isinstance(answer, Refused) else _answer(answer)


@router.post("/{kind}/{account}/{hook}", responses=_ERRORS)
async def provider_callback_hook(request: Request, kind: str, account: str, hook: str) -> Response:
    """A provider's other callback for the account (Twilio's ``inbound``: replies)."""
    return await _receive(request, kind, account, hook)


async def _receive(request: Request, kind: str, account: str, hook: str) -> Response:
    receiver = RECEIVERS.get(kind)
    if receiver is None or hook not in receiver.hooks:
        return error_response(404, "not_found", f"no provider callback {request.url.path!r}")
    service = service_of(request)
    settings = service.settings.accounts.get(account)
    if not isinstance(settings, receiver.account_type):
        return error_response(404, "not_found", f"no {receiver.title} account {account!r}")
    refused = receiver.unconfigured(settings)
    if refused is not None:
        return _refusal(refused)
    call = Callback(
        account=account,
        hook=hook,
        body=await request.body(),
        headers=request.headers,
        query=request.query_params,
        url=public_request_url(service.settings.public_url, request),
    )
    verified = await receiver.verify(call, settings)
    if isinstance(verified, Refused):
        return _refusal(verified)
    answer = await receiver.accept(verified, call, settings, service.db)
    return _refusal(answer) if isinstance(answer, Refused) else _answer(answer)


def public_request_url(public_url: str, request: Request) -> str:
    """The URL the provider called: ``public_url`` (scheme, host and any prefix a proxy
    strips) + the path as sent, percent-encoding and query string untouched."""
    raw_path = request.scope.get("raw_path")
    path = raw_path.decode("latin-1") if raw_path else request.url.path
    query = request.scope.get("query_string", b"").decode("latin-1")
    return public_url.rstrip("/") + path + (f"?{query}" if query else "")


def _refusal(refused: Refused) -> Response:
    return error_response(refused.status, refused.code, refused.message, headers=refused.headers)


def _answer(answer: Answer) -> Response:
    if isinstance(answer.body, str):
        return Response(
            answer.body, answer.status, headers=answer.headers, media_type=answer.media_type
        )
    return JSONResponse(answer.body, answer.status, headers=answer.headers)
