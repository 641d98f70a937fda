"""The registry: notification types, user profiles and push devices."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Request, Response

from tidings.api.auth import Scope, needs
from tidings.api.deps import service_of
from tidings.api.errors import error_response
from tidings.api.schemas import DeviceIn, DeviceOut, ErrorResponse, TypeIn, TypeOut, UserIn, UserOut
from tidings.clock import utcnow
from tidings.content.locales import normalise
from tidings.intake.requests import TypeName, UserId
from tidings.services import registry
from tidings.services.registry import Device, NotificationType, UserProfile
from tidings.workflows.shape import parse_workflow

router = APIRouter(prefix="/v1", tags=["registry"])
_ADMIN = needs(Scope.ADMIN)  # the type catalog
_USERS = needs(Scope.USERS)  # profiles and devices
_NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"model": ErrorResponse}}
_INVALID: dict[int | str, dict[str, Any]] = {422: {"model": ErrorResponse}}


def _create_or_replace(model: type[Any]) -> dict[str, Any]:
    """A PUT answers 201 when it creates and 200 when it replaces; both are declared."""
    replaced = {"model": model, "description": "Replaced"}
    return {"status_code": 201, "response_model": model, "responses": {200: replaced, **_INVALID}}


@router.put("/types/{name}", **_create_or_replace(TypeOut), dependencies=_ADMIN)
async def put_type(
    request: Request, response: Response, name: Annotated[TypeName, Path()], body: TypeIn
) -> Any:
    """Create (201) or replace (200) a notification type."""
    if body.workflow is not None:  # a 422 naming the step and field (docs/workflows.md)
        parse_workflow(body.workflow, [c.value for c in body.channels])
    stored, existed = await registry.put_type(service_of(request), _type_row(name, body))
    if existed:
        response.status_code = 200
    return _type_out(stored)


@router.get("/types/{name}", response_model=TypeOut, responses=_NOT_FOUND, dependencies=_ADMIN)
async def get_type(request: Request, name: str) -> Any:
    found = await registry.get_type(service_of(request).db, name)
    if found is None:
        return error_response(404, "not_found", f"no notification type {name!r}", "name")
    return _type_out(found)


def _type_row(name: str, body: TypeIn) -> NotificationType:
    retry = body.retry.model_dump(by_alias=True, exclude_none=True) if body.retry else None
    now = utcnow()
    return NotificationType(
        name=name,
        category=body.category.value,
        priority=body.priority.value,
        channels=[c.value for c in dict.fromkeys(body.channels)],
        ttl_seconds=body.ttl,
        retry=retry or None,
        required_channels=(
            None if body.required_channels is None else [c.value for c in body.required_channels]
        ),
        default_locale=body.default_locale and normalise(body.default_locale),
        collapse_key=body.collapse_key,
        email=body.email.model_dump(by_alias=True, exclude_none=True) if body.email else None,
        tracking=body.tracking.model_dump(exclude_none=True) or None if body.tracking else None,
        workflow=body.workflow,
        created_at=now,
        updated_at=now,
    )


def _type_out(kind: NotificationType) -> TypeOut:
    return TypeOut(
        name=kind.name,
        category=kind.category,
        priority=kind.priority,
        channels=kind.channels,
        ttl=kind.ttl_seconds,
        retry=kind.retry,
        required_channels=kind.required_channels,
        default_locale=kind.default_locale,
        collapse_key=kind.collapse_key,
        email=kind.email,
        tracking=kind.tracked,
        workflow=None if kind.workflow is None else list(kind.workflow),
        created_at=kind.created_at,
        updated_at=kind.updated_at,
    )


def user_out(profile: UserProfile) -> UserOut:
    return UserOut(
        id=profile.id,
        email=profile.email,
        phone=profile.phone,
        slack=profile.slack,
        discord=profile.discord,
        teams=profile.teams,
        telegram=profile.telegram,
        whatsapp=profile.whatsapp,
        timezone=profile.timezone,
        locale=profile.locale,
        quiet_hours=profile.quiet_hours,
        attributes=profile.attributes,
        created_at=profile.created_at,
        updated_at=profile.updated_at,
    )


@router.put("/users/{user_id}", **_create_or_replace(UserOut), dependencies=_USERS)
async def put_user(
    request: Request, response: Response, user_id: Annotated[UserId, Path()], body: UserIn
) -> Any:
    """Create (201) or replace (200) a user profile."""
    fields = body.model_dump(mode="json")
    stored, existed = await registry.put_user(service_of(request).db, user_id, fields)
    if existed:
        response.status_code = 200
    return user_out(stored)


@router.get("/users/{user_id}", response_model=UserOut, responses=_NOT_FOUND, dependencies=_USERS)
async def get_user(request: Request, user_id: str) -> Any:
    found = await registry.get_user(service_of(request).db, user_id)
    if found is None:
        return error_response(404, "not_found", f"no user {user_id!r}", "userId")
    return user_out(found)


@router.post(
    "/devices", status_code=201, response_model=DeviceOut, responses=_INVALID, dependencies=_USERS
)
async def post_device(request: Request, body: DeviceIn) -> Any:
    """Register a push token for a user (registering it again reactivates it)."""
    db = service_of(request).db
    return _device_out(await registry.register_device(db, body.token, body.user_id, body.platform))


# {token:path}: a Web Push subscription (a JSON token) holds its endpoint URL, slashes and all.
@router.get(
    "/devices/{token:path}", response_model=DeviceOut, responses=_NOT_FOUND, dependencies=_USERS
)
async def get_device(request: Request, token: str) -> Any:
    """A push token: whether it is active, and if not, why (for example ``Unregistered``
    when APNs or FCM said the app was removed)."""
    found = await registry.get_device(service_of(request).db, token)
    if found is None:
        return error_response(404, "not_found", "no such device token", "token")
    return _device_out(found)


@router.get("/users/{user_id}/devices", response_model=list[DeviceOut], dependencies=_USERS)
async def list_devices(request: Request, user_id: str) -> Any:
    """A user's push tokens, active or not."""
    return [
        _device_out(found) for found in await registry.user_devices(service_of(request).db, user_id)
    ]


@router.delete("/devices/{token:path}", status_code=204, responses=_NOT_FOUND, dependencies=_USERS)
async def delete_device(request: Request, token: str) -> Response:
    if not await registry.delete_device(service_of(request).db, token):
        return error_response(404, "not_found", "no such device token", "token")
    return Response(status_code=204)


def _device_out(found: Device) -> DeviceOut:
    return DeviceOut.model_validate(found, from_attributes=True)
