"""Producers' webhook endpoints (docs/events.md, Webhooks): POST, GET, DELETE
/v1/webhook-endpoints, rotate-secret, enable, and the attempts made to each."""

from __future__ import annotations

import asyncio
import base64
import secrets
import uuid
from datetime import timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response

from tidings.api.auth import Scope, caller_of, needs
from tidings.api.deps import service_of
from tidings.api.errors import error_response
from tidings.api.schemas import (
    EndpointAttempt,
    EndpointCreated,
    EndpointIn,
    EndpointOut,
    ErrorResponse,
    SecretRotated,
)
from tidings.clock import utcnow
from tidings.providers import pinned_http
from tidings.providers.base import PermanentError, TransientError
from tidings.providers.ssrf import url_problem
from tidings.refusal import Refusal
from tidings.services import webhook_endpoints as endpoints
from tidings.services.webhook_endpoints import TYPES, Endpoint

router = APIRouter(
    prefix="/v1/webhook-endpoints", tags=["webhooks"], dependencies=needs(Scope.ADMIN)
)
_NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"model": ErrorResponse}}
RESOLVE_SECONDS = 3.0
ROTATION_OVERLAP = timedelta(hours=24)


def new_secret() -> str:
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


async def _checked_url(url: str, allow_private: bool) -> str:
    """A URL tidings may post to, or 422 naming ``url``: the checks of every send
    (providers/pinned_http.py), made now so that a bad endpoint is refused at once."""
    problem = url_problem(url)
    if problem is not None:
        raise Refusal("invalid_url", f"url {problem}", "url")
    try:
        target = pinned_http.target(url, allow_insecure=True)
        async with asyncio.timeout(RESOLVE_SECONDS):
            await pinned_http.checked_addresses(target, allow_private)
    except PermanentError as error:
        if error.reason == "private_target":
            message = "url points to a private, loopback or reserved address"
            raise Refusal("private_url", message, "url") from None
        raise Refusal("invalid_url", "url must be http:// or https:// with a host", "url") from None
    except (TransientError, TimeoutError):
        raise Refusal("unresolvable_url", "url: cannot resolve its host", "url") from None
    return url


def _out(found: Endpoint) -> EndpointOut:
    return EndpointOut(
        id=found.id,
        url=found.url,
        events=list(found.events),
        types=list(found.types) if found.types is not None else None,
        status=found.status,
        disabled_reason=found.disabled_reason,
        created_at=found.created_at,
    )


@router.post("", status_code=201, response_model=EndpointCreated)
async def create_endpoint(request: Request, body: EndpointIn) -> Any:
    """Register an endpoint: it gets the events chosen from now on. The answer holds its
    secret, shown this once."""
    unknown = sorted(set(body.events) - TYPES)
    if unknown:
        known = ", ".join(sorted(TYPES))
        raise Refusal(
            "invalid_request", f"events: unknown {', '.join(unknown)} (known: {known})", "events"
        )
    service = service_of(request)
    url = await _checked_url(body.url, service.settings.webhooks.allow_private)
    secret = new_secret()
    found = await endpoints.create(
        service.db, caller_of(request).namespace, url, body.events, body.types, secret, utcnow()
    )
    return EndpointCreated(**_out(found).model_dump(), secret=secret)


@router.get("", response_model=list[EndpointOut])
async def list_endpoints(request: Request) -> Any:
    found = await endpoints.listed(service_of(request).db, caller_of(request).namespace)
    return [_out(e) for e in found]


@router.get("/{endpoint_id}", response_model=EndpointOut, responses=_NOT_FOUND)
async def get_endpoint(request: Request, endpoint_id: uuid.UUID) -> Any:
    found = await endpoints.get(service_of(request).db, caller_of(request).namespace, endpoint_id)
    return _out(found) if found else _not_found(endpoint_id)


@router.delete("/{endpoint_id}", status_code=204, responses=_NOT_FOUND)
async def delete_endpoint(request: Request, endpoint_id: uuid.UUID) -> Response:
    """Remove the endpoint and what it had not been sent yet."""
    gone = await endpoints.delete(service_of(request).db, caller_of(request).namespace, endpoint_id)
    return Response(status_code=204) if gone else _not_found(endpoint_id)


@router.post(
    "/{endpoint_id}/rotate-secret",
    response_model=SecretRotated,
    responses={**_NOT_FOUND, 409: {"model": ErrorResponse}},
)
async def rotate_secret(request: Request, endpoint_id: uuid.UUID) -> Any:
    """A new secret; every secret it replaces signs messages too for 24 hours, so
    receivers can switch (several rotations a day: several signatures)."""
    service, namespace = service_of(request), caller_of(request).namespace
    secret = new_secret()
    try:
        until = await endpoints.rotate(
            service.db, namespace, endpoint_id, secret, utcnow(), ROTATION_OVERLAP
        )
    except endpoints.TooManyRotations:
        message = (
            f"{endpoints.MAX_PREVIOUS_SECRETS} secrets replaced in the last 24 hours "
            "still sign every message: rotate again once the oldest has expired"
        )
        return error_response(409, "too_many_rotations", message, "endpointId")
    if until is None:
        return _not_found(endpoint_id)
    return SecretRotated(secret=secret, previous_valid_until=until)


@router.post("/{endpoint_id}/enable", response_model=EndpointOut, responses=_NOT_FOUND)
async def enable_endpoint(request: Request, endpoint_id: uuid.UUID) -> Any:
    """Send to a disabled endpoint again, from where it stopped: first the message that
    failed for good, then the rest, each notification's in order."""
    service, namespace = service_of(request), caller_of(request).namespace
    if not await endpoints.enable(service.db, namespace, endpoint_id, utcnow()):
        return _not_found(endpoint_id)
    found = await endpoints.get(service.db, namespace, endpoint_id)
    return _out(found) if found else _not_found(endpoint_id)


@router.get("/{endpoint_id}/attempts", response_model=list[EndpointAttempt], responses=_NOT_FOUND)
async def list_attempts(
    request: Request, endpoint_id: uuid.UUID, limit: Annotated[int, Query(ge=1, le=1000)] = 100
) -> Any:
    """The endpoint's newest messages: each one's status, attempts and last answer."""
    namespace = caller_of(request).namespace
    rows = await endpoints.attempts(service_of(request).db, namespace, endpoint_id, limit)
    if rows is None:
        return _not_found(endpoint_id)
    return [
        EndpointAttempt(
            webhook_id=f"msg_{row.id.hex}",
            type=row.event_type,
            status=row.status,
            attempts=row.attempts,
            last_status=row.last_status,
            last_error=row.last_error,
            created_at=row.created_at,
            sent_at=row.sent_at,
            next_attempt_at=row.next_attempt_at if row.status == endpoints.PENDING else None,
        )
        for row in rows
    ]


def _not_found(endpoint_id: uuid.UUID) -> Response:
    return error_response(404, "not_found", f"no webhook endpoint {endpoint_id}", "endpointId")
