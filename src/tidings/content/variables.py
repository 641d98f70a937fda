"""What a template sees: built here alone, so that a preview shows the words a send would."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tidings.store.users import UserProfile


def template_variables(
    data: Mapping[str, Any],
    user_id: str | None,
    profile: UserProfile | None,
    locale: str | None,
    unsubscribe_url: str | None,
    preferences_url: str | None = None,
) -> dict[str, Any]:
    """The notification's data at the top level (and as ``data``), then ``user``, ``locale``,
    ``unsubscribe_url`` and ``preferences_url``, which win over data keys of the same name.
    ``user`` holds the id, locale, timezone and attributes; a user id without a profile
    still has its id."""
    return {
        **data,
        "data": data,
        "user": _user(user_id, profile),
        "locale": locale,
        "unsubscribe_url": unsubscribe_url,
        "preferences_url": preferences_url,
    }


def _user(user_id: str | None, profile: UserProfile | None) -> dict[str, Any]:
    if user_id is None:
        return {}
    return {
        "id": user_id,
        "locale": profile.locale if profile else None,
        "timezone": profile.timezone if profile else None,
        **((profile.attributes if profile else None) or {}),
    }
