"""Preferences: may this category reach this user on this channel? (docs/architecture.md, Policy
check order)"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping

from tidings.priorities import Category, Channel
from tidings.store.preferences import UserPreferences
from tidings.store.types import NotificationType

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


def required_by_category(types: Iterable[NotificationType]) -> dict[str, list[str]]:
    """Per category, the channels on which a user's choice switches nothing off: every type
    of the category that sends on the channel requires it. A channel no type of the
    category sends on yet follows the default (a transactional type requires its channels)."""
    all_require: dict[tuple[str, str], bool] = {}
    for kind in types:
        for channel in kind.channels:
            key = (kind.category, channel)
            all_require[key] = all_require.get(key, True) and channel in kind.required
    return {
        category.value: [
            channel.value
            for channel in Channel
            if all_require.get((category.value, channel.value), category is Category.TRANSACTIONAL)
        ]
        for category in Category
    }


def effective(
    preferences: UserPreferences | None,
    required: Mapping[str, Collection[str]],
    defaults: Mapping[str, bool] = DEFAULTS,
) -> dict[str, dict[str, bool]]:
    """Every category and channel with the value that applies, for the API: a required
    channel is on, whatever was chosen."""
    return {
        category.value: {
            channel.value: wanted(
                preferences,
                category.value,
                channel.value,
                required.get(category.value, ()),
                defaults,
            )
            for channel in Channel
        }
        for category in Category
    }
