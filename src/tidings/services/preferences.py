"""A user's preferences: what they agreed to receive, where and when."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tidings.clock import utcnow
from tidings.policy.preferences import effective, required_by_category
from tidings.service import Service
from tidings.store import preferences, users


@dataclass(frozen=True)
class Shown:
    """Every category and channel with the value that applies to the user, the channels no
    choice switches off, and the profile's settings that say when."""

    user_id: str
    categories: dict[str, dict[str, bool]]
    required: dict[str, list[str]]
    quiet_hours: Mapping[str, str] | None
    timezone: str | None
    locale: str | None


async def replace(
    service: Service,
    user_id: str,
    categories: dict[str, dict[str, bool]],
    profile: Mapping[str, Any],
) -> None:
    """Replace the user's choices, and set the profile's columns given (``timezone``,
    ``locale``, ``quiet_hours``)."""
    now = utcnow()
    await preferences.replace(service.db, user_id, categories, now)
    await users.put_user_settings(service.db, user_id, dict(profile), now)


async def shown(service: Service, user_id: str) -> Shown | None:
    """What applies to the user; None when there is no such user."""
    profile = await users.get_user(service.db, user_id)
    if profile is None:
        return None
    stored = (await preferences.of_users(service.db, [user_id])).get(user_id)
    required = required_by_category((await service.types.all()).values())
    return Shown(
        user_id=user_id,
        categories=effective(stored, required),
        required=required,
        quiet_hours=profile.quiet_hours,
        timezone=profile.timezone,
        locale=profile.locale,
    )


async def choose(
    service: Service,
    user_id: str,
    chosen: Mapping[tuple[str, str], bool],
    profile: Mapping[str, Any],
) -> None:
    """Set the choices given and keep the user's others (the preference center shows only
    the channels the service sends on): ``replace`` with the stored ones and these."""
    stored = (await preferences.of_users(service.db, [user_id])).get(user_id, {})
    categories: dict[str, dict[str, bool]] = {}
    for (category, channel), on in {**stored, **chosen}.items():
        categories.setdefault(category, {})[channel] = on
    await replace(service, user_id, categories, profile)
