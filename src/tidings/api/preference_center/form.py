"""The preference center's form: what the page shows as switches, and what a POST of it
asks for, read as the API reads a PUT of preferences (the same validation)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import parse_qs

from pydantic import ValidationError

from tidings.api.schemas import PreferencesIn
from tidings.priorities import Category, Channel
from tidings.services.registry import NotificationType

# Every switch of a page is a field, with the nonce, quiet hours, time zone and language.
MAX_FIELDS = len(Category) * len(Channel) + 10
MAX_VALUE_CHARS = 100
# Shown when no type is registered yet: the channels most services send on.
USUAL_CHANNELS = (Channel.EMAIL.value, Channel.SMS.value, Channel.PUSH.value)


class FormError(Exception):
    """A field the page could not have posted, or a value the API would refuse: the key
    of its words in ``texts`` (``error.quiet``...)."""


def channels_shown(types: Iterable[NotificationType]) -> list[str]:
    """The channels any registered type sends on, in the order of ``Channel``."""
    used = {channel for kind in types for channel in kind.channels}
    return [c.value for c in Channel if c.value in used] or list(USUAL_CHANNELS)


def fields(body: bytes) -> dict[str, list[str]]:
    """A urlencoded body's fields, bounded in number and length; ``FormError`` beyond."""
    try:
        found = parse_qs(body.decode(), keep_blank_values=True, max_num_fields=MAX_FIELDS)
    except (UnicodeDecodeError, ValueError):
        raise FormError("error.form") from None
    if any(len(v) > MAX_VALUE_CHARS for values in found.values() for v in values):
        raise FormError("error.form")
    return found


def read(
    found: Mapping[str, list[str]], switches: Iterable[tuple[str, str]]
) -> tuple[dict[tuple[str, str], bool], dict[str, Any]]:
    """The choices (a switch not posted is off, as a checkbox left unticked) and the profile
    settings of a posted form; ``FormError`` for anything the page could not have sent."""
    unlocked = set(switches)
    on = set()
    for value in found.get("on", []):
        category, _, channel = value.partition(".")
        if (category, channel) not in unlocked:
            raise FormError("error.form")
        on.add((category, channel))
    choices = {switch: switch in on for switch in unlocked}
    return choices, _profile(found)


def _one(found: Mapping[str, list[str]], name: str) -> str:
    values = found.get(name, [""])
    if len(values) != 1:
        raise FormError("error.form")
    return values[0].strip()


def _profile(found: Mapping[str, list[str]]) -> dict[str, Any]:
    start, end = _one(found, "quiet_from"), _one(found, "quiet_to")
    if bool(start) != bool(end):
        raise FormError("error.quiet")
    body = {
        "quietHours": {"from": start, "to": end} if start else None,
        "timezone": _one(found, "timezone") or None,
        "locale": _one(found, "locale") or None,
    }
    try:
        checked = PreferencesIn.model_validate(body)
    except ValidationError as error:
        raise FormError(_error_key(error)) from None
    quiet = checked.quiet_hours
    return {
        "quiet_hours": quiet.model_dump(mode="json", by_alias=True) if quiet else None,
        "timezone": checked.timezone,
        "locale": checked.locale,
    }


def _error_key(error: ValidationError) -> str:
    where = str(error.errors()[0]["loc"][0]) if error.errors() else ""
    return {"quietHours": "error.quiet", "timezone": "error.timezone"}.get(where, "error.locale")
