"""Quiet hours in the user's time zone (docs/architecture.md, Policy check order).

A window is two local wall-clock times; ``22:00`` to ``08:00`` crosses midnight. Inside it, a
delivery waits for the window's end, which is computed in the user's zone for the right day,
so a night across a DST change lasts the hour longer or shorter that it really does.
"""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

from tidings.priorities import Category, Channel

# Channels that wait by default: a buzzing phone at night. Email does not wake anyone.
DEFAULT_CHANNELS = frozenset({Channel.PUSH.value, Channel.SMS.value})


def applies(category: str, channel: str, channels: frozenset[str] = DEFAULT_CHANNELS) -> bool:
    """Transactional messages skip quiet hours (docs/architecture.md, Policy check order)."""
    return category != Category.TRANSACTIONAL.value and channel in channels


def quiet_until(now: datetime, zone: str, start: str, end: str) -> datetime | None:
    """When the window ``start`` to ``end`` (``HH:MM``, local) that ``now`` is in ends, in UTC;
    None when ``now`` is outside it."""
    tz = ZoneInfo(zone)
    local = now.astimezone(tz)
    begins, ends = _clock(start), _clock(end)
    today = local.time().replace(tzinfo=None)
    if begins < ends:
        inside = begins <= today < ends
        end_day = local.date()
    else:  # across midnight
        inside = today >= begins or today < ends
        end_day = local.date() + timedelta(days=1) if today >= begins else local.date()
    if not inside:
        return None
    # A wall-clock time that does not exist (spring forward) resolves to the same instant as
    # the time an hour later: the first moment the window is over.
    return datetime.combine(end_day, ends, tzinfo=tz).astimezone(UTC)


def _clock(value: str) -> time:
    hours, minutes = value.split(":")
    return time(int(hours), int(minutes))
