"""When each user of a campaign is sent to: evenly over ``spreadOver`` with jitter, or at a
wall-clock time in the user's own zone (docs/architecture.md, Campaigns).

The window is cut into as many slots as the audience has users, and user number ``k`` (in
the expansion's order) gets a random instant inside slot ``k``: every minute of the window
gets its share, and no two processes' pages pile up at the same instants.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

from tidings.store.campaigns import Campaign


def local_start(send_at: datetime, local_time: str, zone: str) -> datetime:
    """The first ``local_time`` (HH:MM) in ``zone`` that is not before ``send_at``, in UTC."""
    tz = ZoneInfo(zone)
    hours, minutes = (int(part) for part in local_time.split(":"))
    day = send_at.astimezone(tz).date()
    for offset in range(3):  # today, else tomorrow (a DST gap can push one more day)
        candidate = datetime.combine(day + timedelta(days=offset), time(hours, minutes), tz)
        if candidate.astimezone(UTC) >= send_at:
            return candidate.astimezone(UTC)
    raise AssertionError("unreachable: a wall-clock time recurs every day")


def window_start(campaign: Campaign, zone: str | None) -> datetime:
    """Where the user's share of the window begins."""
    if campaign.local_time is None:
        return campaign.send_at
    return local_start(campaign.send_at, campaign.local_time, zone or campaign.timezone or "UTC")


def spread_seconds(campaign: Campaign, due_spread: float) -> float:
    """The campaign's window; without spreadOver (and without localTime), the due-spike
    window, so that a whole audience is never due at one instant."""
    if campaign.spread_seconds or campaign.local_time:
        return float(campaign.spread_seconds)
    return due_spread


def planned_at(
    campaign: Campaign,
    ordinal: int,
    zone: str | None,
    window: float,
    rng: random.Random,
) -> datetime:
    """The send time of the campaign's ``ordinal``-th user (from 0)."""
    start = window_start(campaign, zone)
    if window <= 0:
        return start
    size = campaign.audience_size or 0
    # Users who joined after the audience was counted fall anywhere in the window.
    slot = (ordinal + rng.random()) / size if ordinal < size else rng.random()
    return start + timedelta(seconds=window * slot)
