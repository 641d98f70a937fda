"""Durations of workflow steps: ``"90s"``, ``"10m"``, ``"1h30m"``, ``"2d"``, or ISO 8601
(``"PT10M"``, ``"P1DT2H"``), from 1 second to 30 days."""

from __future__ import annotations

import re
from datetime import timedelta

MIN_DURATION = timedelta(seconds=1)
MAX_DURATION = timedelta(days=30)

# Units largest first, each at most once: "1h30m", never "30m1h" nor "1h1h".
_SHORT = re.compile(r"(?:(\d{1,7})d)?(?:(\d{1,7})h)?(?:(\d{1,7})m)?(?:(\d{1,7})s)?")
# ISO 8601 durations without years and months (their length in seconds is not fixed).
_ISO = re.compile(
    r"P(?:(\d{1,7})W)?(?:(\d{1,7})D)?(?:T(?:(\d{1,7})H)?(?:(\d{1,7})M)?(?:(\d{1,7})S)?)?"
)


class DurationError(ValueError):
    """Not a duration, or one out of range (the message says which)."""


def parse_duration(text: object) -> timedelta:
    """The duration ``text`` names, or ``DurationError``."""
    if not isinstance(text, str):
        raise DurationError('must be a duration such as "90s", "10m", "1h30m" or "PT10M"')
    value = _parse(text.strip())
    if value is None:
        raise DurationError(
            f'{text[:40]!r} is not a duration: write "90s", "10m", "1h30m", "2d" or ISO 8601 '
            '("PT10M"; no years or months)'
        )
    if not MIN_DURATION <= value <= MAX_DURATION:
        raise DurationError(f"{text[:40]!r} is out of range: from 1 second to 30 days")
    return value


def _parse(text: str) -> timedelta | None:
    short = _SHORT.fullmatch(text)
    if short and any(short.groups()):
        days, hours, minutes, seconds = (int(part or 0) for part in short.groups())
        return timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)
    iso = _ISO.fullmatch(text.upper())
    if iso and any(iso.groups()):
        weeks, days, hours, minutes, seconds = (int(part or 0) for part in iso.groups())
        return timedelta(weeks=weeks, days=days, hours=hours, minutes=minutes, seconds=seconds)
    return None
