"""The suppression list: GET, PUT and DELETE /v1/suppressions/{channel}/{address}."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Request, Response

from tidings.api.auth import Scope, needs
from tidings.api.deps import service_of
from tidings.api.errors import error_response
from tidings.api.schemas import ErrorResponse, SuppressionIn, SuppressionOut
from tidings.priorities import Channel
from tidings.services import suppressions
from tidings.services.suppressions import Suppression

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
    reason = body.reason if body else "manual"
    return _out(await suppressions.suppress(service_of(request).db, channel, address, reason))


@router.get("/{channel}/{address:path}", response_model=SuppressionOut, responses=_NOT_FOUND)
async def get_suppression(request: Request, channel: Channel, address: Address) -> Any:
    found = await suppressions.get(service_of(request).db, channel, address)
    if found is None:
        return error_response(404, "not_found", f"{channel.value} address not suppressed")
    return _out(found)


@router.delete("/{channel}/{address:path}", status_code=204, responses=_NOT_FOUND)
async def delete_suppression(request: Request, channel: Channel, address: Address) -> Response:
    """Allow sending to this address again."""
    if not await suppressions.lift(service_of(request).db, channel, address):
        return error_response(404, "not_found", f"{channel.value} address not suppressed")
    return Response(status_code=204)


def _out(found: Suppression) -> SuppressionOut:
    return SuppressionOut(
        channel=found.channel,
        address=found.address,
        reason=found.reason,
        created_at=found.created_at,
    )
