"""Preferences: may this category reach this user on this channel? (docs/architecture.md, Policy
check order)"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from tidings.priorities import Category, Channel
from tidings.store.preferences import UserPreferences

DEFAULTS: Mapping[str, bool] = {category.value: True for category in Category}


def wanted(
    preferences: UserPreferences | None,
    category: str,
    channel: str,
    required: Collection[str],
    defaults: Mapping[str, bool] = DEFAULTS,
) -> bool:
    if channel in required:
        return True
    default = defaults.get(category, True)
    if preferences is None:
        return default
    return preferences.get((category, channel), default)


def effective(
    preferences: UserPreferences | None, defaults: Mapping[str, bool] = DEFAULTS
) -> dict[str, dict[str, bool]]:
    """Every category and channel with the value that applies, for the API."""
    return {
        category.value: {
            channel.value: wanted(preferences, category.value, channel.value, (), defaults)
            for channel in Channel
        }
        for category in Category
    }
