"""PUT/GET /v1/users/{id}/preferences: what a user agreed to receive, where and when."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Request

from tidings.api.auth import Scope, needs
from tidings.api.deps import service_of
from tidings.api.errors import error_response
from tidings.api.schemas import ErrorResponse, PreferencesIn, PreferencesOut
from tidings.intake.requests import UserId
from tidings.services import preferences

router = APIRouter(prefix="/v1/users", tags=["preferences"], dependencies=needs(Scope.USERS))


@router.put("/{user_id}/preferences", response_model=PreferencesOut)
async def put_preferences(
    request: Request, user_id: Annotated[UserId, Path()], body: PreferencesIn
) -> Any:
    """Replace the user's preferences; categories and channels left out take the defaults.
    The choices go in ``categories`` or at the top level under each category's name
    (``{"marketing": {"email": false}}``). Applies within seconds to what is already queued."""
    categories = {
        category.value: {channel.value: on for channel, on in channels.items()}
        for category, channels in body.choices().items()
    }
    settings = body.model_dump(mode="json", by_alias=True, include=body.model_fields_set)
    settings.pop("categories", None)
    profile = {"timezone", "locale", "quietHours"}
    values = {_column(name): settings[name] for name in profile & settings.keys()}
    await preferences.replace(service_of(request), user_id, categories, values)
    return await _shown(request, user_id)


@router.get(
    "/{user_id}/preferences",
    response_model=PreferencesOut,
    responses={404: {"model": ErrorResponse}},
)
async def get_preferences(request: Request, user_id: str) -> Any:
    """Every category and channel with the value that applies to this user."""
    shown = await _shown(request, user_id)
    if shown is None:
        return error_response(404, "not_found", f"no user {user_id!r}", "userId")
    return shown


def _column(name: str) -> str:
    return {"quietHours": "quiet_hours"}.get(name, name)


async def _shown(request: Request, user_id: str) -> PreferencesOut | None:
    found = await preferences.shown(service_of(request), user_id)
    if found is None:
        return None
    return PreferencesOut(
        user_id=found.user_id,
        categories=found.categories,
        required=found.required,
        quiet_hours=found.quiet_hours,
        timezone=found.timezone,
        locale=found.locale,
    )
