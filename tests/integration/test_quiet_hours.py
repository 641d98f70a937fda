"""Quiet hours in the user's time zone: windows across midnight, DST days, deferral."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.helpers import eventually, post, put_type, running_dispatcher
from tidings.policy.quiet_hours import applies, quiet_until
from tidings.providers.testing import ScriptedProvider
from tidings.service import Service

NEW_YORK = "America/New_York"


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


@pytest.mark.parametrize(
    ("now", "zone", "window", "until"),
    [
        # Sao Paulo (UTC-3, no DST): 23:30 local is inside 22:00-08:00, which ends tomorrow.
        (utc(2026, 11, 30, 2, 30), "America/Sao_Paulo", ("22:00", "08:00"), utc(2026, 11, 30, 11)),
        # 06:00 local, still inside the same night's window.
        (utc(2026, 11, 30, 9), "America/Sao_Paulo", ("22:00", "08:00"), utc(2026, 11, 30, 11)),
        # 12:00 local: outside.
        (utc(2026, 11, 30, 15), "America/Sao_Paulo", ("22:00", "08:00"), None),
        # A window within one day.
        (utc(2026, 11, 30, 16), "America/Sao_Paulo", ("12:00", "14:00"), utc(2026, 11, 30, 17)),
        (utc(2026, 11, 30, 17), "America/Sao_Paulo", ("12:00", "14:00"), None),
        # Spring forward (New York, 2026-03-08 02:00 -> 03:00): the window's end, 02:30,
        # does not exist that day; it ends at 03:30 EDT, the same instant.
        (utc(2026, 3, 8, 6, 30), NEW_YORK, ("01:00", "02:30"), utc(2026, 3, 8, 7, 30)),
        # Fall back (2026-11-01 02:00 -> 01:00): the night 22:00-08:00 lasts 11 hours.
        (utc(2026, 11, 1, 3), NEW_YORK, ("22:00", "08:00"), utc(2026, 11, 1, 13)),
        # Spring forward night: 22:00-08:00 lasts 9 hours.
        (utc(2026, 3, 8, 3), NEW_YORK, ("22:00", "08:00"), utc(2026, 3, 8, 12)),
    ],
)
def test_quiet_until(
    now: datetime, zone: str, window: tuple[str, str], until: datetime | None
) -> None:
    assert quiet_until(now, zone, *window) == until


clocks = st.times().map(lambda t: t.replace(second=0, microsecond=0))
zones = st.sampled_from([NEW_YORK, "Europe/Berlin", "Australia/Lord_Howe", "Asia/Kolkata", "UTC"])


@given(
    now=st.datetimes(
        min_value=datetime(2020, 1, 1), max_value=datetime(2035, 1, 1), timezones=st.just(UTC)
    ),
    zone=zones,
    start=clocks,
    end=clocks,
)
def test_quiet_until_properties(now: datetime, zone: str, start: time, end: time) -> None:
    if start == end:
        return
    local = now.astimezone(ZoneInfo(zone)).time().replace(tzinfo=None)
    inside = start <= local < end if start < end else (local >= start or local < end)
    until = quiet_until(now, zone, start.strftime("%H:%M"), end.strftime("%H:%M"))
    assert (until is not None) == inside
    if until is not None:
        assert now < until <= now + timedelta(hours=25)
        # It ends on the window's end as the user's clock shows it (or just after a gap).
        shown = until.astimezone(ZoneInfo(zone)).time()
        gap = datetime.combine(until.date(), end) - datetime.combine(until.date(), shown)
        assert shown == end or abs(gap) <= timedelta(hours=1)


def test_quiet_hours_apply_to_push_and_sms_and_never_to_transactional() -> None:
    assert applies("marketing", "push") and applies("reminder", "sms")
    assert not applies("marketing", "email")
    assert not applies("transactional", "push")


async def night_owl(client: httpx.AsyncClient) -> dict[str, Any]:
    """A user whose quiet hours cover every moment of the test."""
    now = datetime.now(UTC)
    start, end = (now - timedelta(hours=1)).strftime("%H:%M"), (now + timedelta(hours=2))
    body = {"quietHours": {"from": start, "to": end.strftime("%H:%M")}, "timezone": "UTC"}
    response = await client.put("/v1/users/owl/preferences", json=body)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


async def test_quiet_hours_defer_marketing_push_without_using_an_attempt(
    client: httpx.AsyncClient, service: Service
) -> None:
    await night_owl(client)
    await put_type(client, "promo", category="marketing", priority="low", channels=("push",))
    await put_type(client, "login.alert", priority="high", channels=("push",))
    to = {"deviceTokens": ["tok-owl-0000000000000"]}
    promo = (await post(client, {"type": "promo", "userId": "owl", "to": to})).json()
    alert = (await post(client, {"type": "login.alert", "userId": "owl", "to": to})).json()
    provider = ScriptedProvider()
    async with running_dispatcher(service, provider):
        await eventually(lambda: provider.completed)

        async def deferred() -> dict[str, Any] | None:
            shown = (await client.get(f"/v1/notifications/{promo['id']}")).json()
            delivery: dict[str, Any] = shown["deliveries"][0]
            return delivery if delivery["history"][-1]["kind"] == "deferred" else None

        held = await eventually(deferred)
    assert [c.priority for c in provider.calls] == ["high"]  # only the transactional alert
    assert (held["status"], held["attempts"]) == ("PENDING", 0)
    wait = datetime.fromisoformat(held["nextAttemptAt"]) - datetime.now(UTC)
    assert timedelta(hours=1, minutes=50) < wait < timedelta(hours=2, minutes=11)
    assert held["history"][-1]["detail"] == {"reason": "quiet_hours"}
    assert alert["deliveries"][0]["status"] == "PENDING"
