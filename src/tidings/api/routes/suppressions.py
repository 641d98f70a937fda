"""The suppression list: GET, PUT and DELETE /v1/suppressions/{channel}/{address}."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Request, Response

from tidings.api.auth import Scope, needs
from tidings.api.deps import service_of
from tidings.api.errors import error_response
from tidings.api.schemas import ErrorResponse, SuppressionIn, SuppressionOut
from tidings.clock import utcnow
from tidings.priorities import Channel
from tidings.store import suppressions
from tidings.store.suppressions import canonical_address

router = APIRouter(
    prefix="/v1/suppressions", tags=["suppressions"], dependencies=needs(Scope.ADMIN)
)
_NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"model": ErrorResponse}}
Address = Annotated[str, Path(min_length=1, max_length=1024)]


@router.put("/{channel}/{address:path}", response_model=SuppressionOut)
async def put_suppression(
    request: Request, channel: Channel, address: Address, body: SuppressionIn | None = None
) -> Any:
    """Never send to this address on this channel again (until the entry is deleted)."""
    db = service_of(request).db
    canonical = canonical_address(channel, address)
    reason = body.reason if body else "manual"
    await suppressions.put(db, channel, canonical, reason, utcnow())
    return SuppressionOut(**(await suppressions.get(db, channel, canonical)) or {})


@router.get("/{channel}/{address:path}", response_model=SuppressionOut, responses=_NOT_FOUND)
async def get_suppression(request: Request, channel: Channel, address: Address) -> Any:
    found = await suppressions.get(
        service_of(request).db, channel, canonical_address(channel, address)
    )
    if found is None:
        return error_response(404, "not_found", f"{channel.value} address not suppressed")
    return SuppressionOut(**found)


@router.delete("/{channel}/{address:path}", status_code=204, responses=_NOT_FOUND)
async def delete_suppression(request: Request, channel: Channel, address: Address) -> Response:
    """Allow sending to this address again."""
    db = service_of(request).db
    if not await suppressions.delete(db, channel, canonical_address(channel, address)):
        return error_response(404, "not_found", f"{channel.value} address not suppressed")
    return Response(status_code=204)
