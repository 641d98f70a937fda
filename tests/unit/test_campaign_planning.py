"""Campaign send-time planning (campaigns/planning.py): the spread is uniform, localTime is
that wall-clock time in each user's zone, on the first day it has not passed."""

from __future__ import annotations

import random
import uuid
from collections import Counter
from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

from hypothesis import given
from hypothesis import strategies as st

from tidings.campaigns.planning import local_start, planned_at
from tidings.store.campaigns import Campaign

START = datetime(2026, 12, 1, 17, 0, tzinfo=UTC)


def campaign(size: int, spread: int = 1800, local_time: str | None = None) -> Campaign:
    return Campaign(
        id=uuid.uuid4(), namespace="default", idempotency_key="k", request_hash="h",
        name=None, type="presale", category="marketing", priority="low", audience={},
        data={}, channels=["email"], send_at=START, spread_seconds=spread,
        local_time=local_time, timezone=None, status="EXPANDING", audience_size=size,
        cursor=None, expanded=0, deliveries=0, expander=None, lease_until=None,
        created_at=START, updated_at=START, started_at=None, expanded_at=None,
        finished_at=None,
    )  # fmt: skip


def test_a_100000_user_spread_over_30_minutes_is_uniform_per_minute() -> None:
    c, rng = campaign(100_000), random.Random(7)
    times = [planned_at(c, k, None, 1800, rng) for k in range(100_000)]
    per_minute = Counter(int((t - START).total_seconds() // 60) for t in times)
    assert sorted(per_minute) == list(range(30))
    expected = 100_000 / 30
    assert all(abs(n - expected) <= 0.1 * expected for n in per_minute.values()), per_minute
    assert min(times) >= START and max(times) < START + timedelta(minutes=30)


def test_users_beyond_the_counted_audience_still_fall_in_the_window() -> None:
    c, rng = campaign(10), random.Random(1)
    late = [planned_at(c, k, None, 600, rng) for k in range(10, 100)]
    assert all(START <= t < START + timedelta(seconds=600) for t in late)


def test_ten_oclock_in_three_zones() -> None:
    c, rng = campaign(3, spread=0, local_time="10:00"), random.Random(2)
    for zone in ("America/Sao_Paulo", "Europe/Lisbon", "Asia/Tokyo"):
        at = planned_at(c, 0, zone, 0, rng)
        local = at.astimezone(ZoneInfo(zone))
        assert (local.hour, local.minute) == (10, 0)
        assert START <= at < START + timedelta(days=1)
    # 17:00 UTC is 02:00 in Tokyo the next day: 10:00 is still ahead there, that same day.
    tokyo = planned_at(c, 0, "Asia/Tokyo", 0, rng).astimezone(ZoneInfo("Asia/Tokyo"))
    assert tokyo.date() == datetime(2026, 12, 2).date()
    # 17:00 UTC is 14:00 in Sao Paulo: 10:00 has passed, so tomorrow.
    sao_paulo = planned_at(c, 0, "America/Sao_Paulo", 0, rng).astimezone(
        ZoneInfo("America/Sao_Paulo")
    )
    assert sao_paulo.date() == datetime(2026, 12, 2).date()


ZONES = ["UTC", "America/Sao_Paulo", "Europe/Lisbon", "Asia/Tokyo", "America/New_York",
         "Australia/Lord_Howe", "Pacific/Chatham", "Asia/Kathmandu"]  # fmt: skip


@given(
    st.datetimes(
        min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
    ),
    st.sampled_from(ZONES),
    st.integers(0, 23),
    st.integers(0, 59),
)
def test_local_start_is_the_first_such_time_not_before_send_at(
    send_at: datetime, zone: str, hour: int, minute: int
) -> None:
    at = local_start(send_at, f"{hour:02d}:{minute:02d}", zone)
    assert send_at <= at < send_at + timedelta(days=1, hours=2)
    tz = ZoneInfo(zone)
    local = at.astimezone(tz)
    if (local.hour, local.minute) != (hour, minute):
        # Only a wall-clock time that a DST change skips that day may come out otherwise.
        wall = datetime.combine(local.date(), time(hour, minute))
        assert wall.replace(tzinfo=tz).astimezone(UTC).astimezone(tz).replace(tzinfo=None) != wall
    # No earlier day's occurrence would have done: it was before sendAt.
    before = datetime.combine(local.date() - timedelta(days=1), time(hour, minute), tz)
    assert before.astimezone(UTC) < send_at
