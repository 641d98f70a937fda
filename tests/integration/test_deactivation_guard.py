"""The mass deactivation guard: a wrong APNs environment or topic, or FCM project, answers
every token as invalid; the guard tells that from dead tokens, holds the account's push and
deactivates nothing. Its window and state machine over a fake clock, then the real
dispatcher with devices registered through the API."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from hypothesis import given
from hypothesis import strategies as st

from tests.helpers import eventually, put_type, running_dispatcher
from tidings.dispatch.dispatcher import Dispatcher
from tidings.dispatch.protection.deactivation_guard import (
    PROBE_DEFER,
    DeactivationGuard,
    DeactivationGuardSettings,
    GuardStatus,
    Trip,
    Window,
    configuration_shaped,
    trips,
)
from tidings.providers.base import (
    Message,
    PermanentError,
    PoisonError,
    SendResult,
    TransientError,
)
from tidings.service import Service
from tidings.states import Effect
from tidings.store.deactivation_guard import GuardRecord, held_note
from tidings.store.engine import Database
from tidings.store.schema import delivery, device

ACCOUNT = "apns-main"
SETTINGS = DeactivationGuardSettings(
    share=0.2, min_samples=20, window_seconds=60, hold_seconds=300, probes=3
)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0
        self.epoch = datetime(2031, 1, 1, tzinfo=UTC)

    def __call__(self) -> float:
        return self.now

    def wall(self) -> datetime:
        return self.epoch + timedelta(seconds=self.now)


def new_guard(
    clock: FakeClock, settings: DeactivationGuardSettings = SETTINGS
) -> DeactivationGuard:
    return DeactivationGuard(settings, clock=clock, wall=clock.wall)


def bad_token(reason: str = "BadDeviceToken") -> PermanentError:
    return PermanentError(f"apns: 400 {reason}", effect=Effect.DEACTIVATE_DEVICE, reason=reason)


def trip_it(guard: DeactivationGuard, clock: FakeClock) -> None:
    for _ in range(SETTINGS.min_samples):
        guard.record(ACCOUNT, bad_token())
        clock.now += 0.01
    assert guard.status(ACCOUNT) is GuardStatus.HELD


# -- the rule and the window ----------------------------------------------------------------


def test_configuration_shaped_reasons_are_the_environment_topic_and_project_ones() -> None:
    for reason in ("BadDeviceToken", "DeviceTokenNotForTopic", "INVALID_ARGUMENT"):
        assert configuration_shaped(Effect.DEACTIVATE_DEVICE, reason)
    # Genuine dead tokens come one at a time: never the guard's business.
    for reason in ("Unregistered", "UNREGISTERED", "ExpiredToken"):
        assert not configuration_shaped(Effect.DEACTIVATE_DEVICE, reason)
    # INVALID_ARGUMENT about the message, not the token, deactivates nothing anyway.
    assert not configuration_shaped(None, "INVALID_ARGUMENT")
    assert not configuration_shaped(Effect.SUPPRESS_ADDRESS, "BadDeviceToken")


@given(
    sends=st.integers(0, 500),
    data=st.data(),
    share=st.floats(0.01, 0.99),
    min_samples=st.integers(2, 200),
)
def test_the_rule_needs_enough_sends_and_more_than_the_share(
    sends: int, data: st.DataObject, share: float, min_samples: int
) -> None:
    settings = DeactivationGuardSettings(share=share, min_samples=min_samples)
    bad = data.draw(st.integers(0, sends))
    tripped = trips(sends, bad, settings)
    if sends < min_samples:
        assert not tripped  # never below min_samples, whatever the share
    elif bad > share * sends:
        assert tripped  # always above the share, with enough samples
    else:
        assert not tripped


def test_one_bad_token_among_three_sends_does_not_trip() -> None:
    clock = FakeClock()
    guard = new_guard(clock)
    for error in (None, bad_token(), None):
        guard.record(ACCOUNT, error)
    assert guard.status(ACCOUNT) is GuardStatus.CLEAR
    assert guard.admit(ACCOUNT) == 0


events = st.lists(
    st.tuples(st.floats(0, 3, allow_nan=False), st.booleans()), min_size=1, max_size=200
)


@given(events=events, seconds=st.integers(1, 10))
def test_the_window_holds_the_current_second_and_the_ones_before(
    events: list[tuple[float, bool]], seconds: int
) -> None:
    window = Window(seconds)
    now, seen = 500.0, []
    for step, deactivating in events:
        now += step
        window.count(now, deactivating)
        seen.append((now, deactivating))
        kept = [bad for at, bad in seen if int(at) > int(now) - seconds]
        assert window.totals(now) == (len(kept), sum(kept))


@given(events=events)
def test_never_trips_below_min_samples(events: list[tuple[float, bool]]) -> None:
    clock = FakeClock()
    guard = new_guard(clock)
    for step, deactivating in events[: SETTINGS.min_samples - 1]:
        clock.now += step
        guard.record(ACCOUNT, bad_token() if deactivating else None)
    assert guard.status(ACCOUNT) is GuardStatus.CLEAR


@given(
    good=st.integers(0, 200),
    bad=st.integers(0, 200),
    order=st.randoms(use_true_random=False),
)
def test_within_one_window_trips_exactly_when_the_share_is_passed(
    good: int, bad: int, order: Any
) -> None:
    """All in one second: the guard trips iff, after some failure, the sends so far were
    enough and more than 20 % of them would deactivate."""
    results = [True] * bad + [False] * good
    order.shuffle(results)
    clock = FakeClock()
    guard = new_guard(clock)
    expected, sends, failures = False, 0, 0
    for deactivating in results:
        guard.record(ACCOUNT, bad_token() if deactivating else None)
        if expected:
            continue
        sends, failures = sends + 1, failures + int(deactivating)
        expected = deactivating and trips(sends, failures, SETTINGS)
    assert (guard.status(ACCOUNT) is GuardStatus.HELD) == expected


def test_dead_tokens_and_other_failures_never_trip_it() -> None:
    clock = FakeClock()
    guard = new_guard(clock)
    unregistered = PermanentError("410", effect=Effect.DEACTIVATE_DEVICE, reason="Unregistered")
    others = [unregistered, TransientError("503"), PoisonError("too large"), TimeoutError()]
    for index in range(200):
        guard.record(ACCOUNT, others[index % len(others)])
    assert guard.status(ACCOUNT) is GuardStatus.CLEAR


def test_old_failures_leave_the_window() -> None:
    clock = FakeClock()
    guard = new_guard(clock)
    for _ in range(10):
        guard.record(ACCOUNT, bad_token())
    clock.now += SETTINGS.window_seconds + 1
    for _ in range(18):
        guard.record(ACCOUNT, None)
    guard.record(ACCOUNT, bad_token())  # 1 of 19, then 2 of 20: 10 %
    guard.record(ACCOUNT, bad_token())
    assert guard.status(ACCOUNT) is GuardStatus.CLEAR


# -- holding, probing, clearing -------------------------------------------------------------


def test_a_trip_holds_then_probes_then_clears() -> None:
    clock = FakeClock()
    guard = new_guard(clock)
    trip_it(guard, clock)
    assert guard.admit(ACCOUNT) == pytest.approx(SETTINGS.hold_seconds, abs=1)
    assert guard.holding(ACCOUNT) == pytest.approx(SETTINGS.hold_seconds, abs=1)
    [trip] = guard.changes()
    assert isinstance(trip, Trip)
    assert (trip.share, trip.samples, trip.reason) == (1.0, 20, "BadDeviceToken")

    clock.now += SETTINGS.hold_seconds
    assert guard.status(ACCOUNT) is GuardStatus.PROBING
    assert [guard.admit(ACCOUNT) for _ in range(4)] == [0, 0, 0, PROBE_DEFER]
    guard.cancel(ACCOUNT)  # one probe got no rate token: another may go
    assert guard.admit(ACCOUNT) == 0
    guard.record(ACCOUNT, TransientError("503"))  # proves nothing: a new probe may go
    assert guard.admit(ACCOUNT) == 0
    for _ in range(3):
        guard.record(ACCOUNT, None)
    assert guard.status(ACCOUNT) is GuardStatus.CLEAR
    assert [type(c).__name__ for c in guard.changes()] == ["Cleared"]
    assert guard.admit(ACCOUNT) == 0


def test_a_probe_that_fails_that_way_holds_it_again() -> None:
    clock = FakeClock()
    guard = new_guard(clock)
    trip_it(guard, clock)
    clock.now += SETTINGS.hold_seconds
    assert guard.admit(ACCOUNT) == 0
    guard.record(ACCOUNT, None)
    guard.record(ACCOUNT, bad_token("DeviceTokenNotForTopic"))
    assert guard.status(ACCOUNT) is GuardStatus.HELD
    assert guard.holding(ACCOUNT) == pytest.approx(SETTINGS.hold_seconds, abs=1)
    first, again = guard.changes()
    assert isinstance(again, Trip) and again.reason == "DeviceTokenNotForTopic"
    assert isinstance(first, Trip) and again.share == first.share


def test_a_pending_deactivation_needs_a_whole_clear_window() -> None:
    clock = FakeClock()
    guard = new_guard(clock)
    assert guard.holding(ACCOUNT) is None
    since = clock.wall()
    assert guard.confirm_in(None) == SETTINGS.window_seconds
    clock.now += 10
    assert guard.confirm_in(since) == pytest.approx(SETTINGS.window_seconds - 10)
    clock.now += SETTINGS.window_seconds
    assert guard.confirm_in(since) == 0
    # A trip and its clear in between: waits from before the clear do not count.
    trip_it(guard, clock)
    clock.now += SETTINGS.hold_seconds
    for _ in range(SETTINGS.probes):
        guard.admit(ACCOUNT)
        guard.record(ACCOUNT, None)
    assert guard.holding(ACCOUNT) is None
    assert guard.confirm_since(ACCOUNT) > since


def test_it_follows_the_fleets_trips_and_resets() -> None:
    clock = FakeClock()
    guard = new_guard(clock)
    now = clock.wall()
    trip = GuardRecord(
        ACCOUNT,
        tripped_at=now,
        hold_until=now + timedelta(seconds=100),
        share=0.9,
        samples=40,
        reason="BadDeviceToken",
        tripped_by="elsewhere",
    )
    guard.follow(trip)
    assert guard.status(ACCOUNT) is GuardStatus.HELD
    assert guard.admit(ACCOUNT) == pytest.approx(100)
    assert guard.changes() == []  # the fleet's, not ours to publish
    clock.now += 5
    reset = GuardRecord(**(vars(trip) | {"cleared_at": clock.wall(), "cleared_by": "operator"}))
    guard.follow(reset)
    assert guard.status(ACCOUNT) is GuardStatus.CLEAR
    assert guard.confirm_since(ACCOUNT) >= clock.wall()
    guard.follow(trip)  # older than what it knows: ignored
    assert guard.status(ACCOUNT) is GuardStatus.CLEAR


def test_a_disabled_guard_never_trips() -> None:
    clock = FakeClock()
    guard = new_guard(clock, DeactivationGuardSettings(enabled=False))
    for _ in range(100):
        guard.record(ACCOUNT, bad_token())
    assert guard.status(ACCOUNT) is GuardStatus.CLEAR


def test_snapshot_is_json_ready() -> None:
    clock = FakeClock()
    guard = new_guard(clock)
    guard.record(ACCOUNT, None)
    assert guard.snapshot()[ACCOUNT]["state"] == "clear"
    trip_it(guard, clock)  # the 20th send trips it: 19 of 20 would deactivate
    shown = json.loads(json.dumps(guard.snapshot()))[ACCOUNT]
    assert (shown["state"], shown["reason"], shown["share"]) == ("held", "BadDeviceToken", 0.95)
    assert shown["holdInSeconds"] == pytest.approx(SETTINGS.hold_seconds, abs=1)


# -- through the real dispatcher ------------------------------------------------------------


class WrongEnvironment:
    """APNs as a build pointed at the wrong environment sees it: BadDeviceToken for every
    token but the ``good`` ones, until ``broken`` is turned off."""

    def __init__(self, good: set[str]) -> None:
        self.name = ACCOUNT
        self.good = good
        self.broken = True
        self.sent: list[str] = []
        self.refused: list[str] = []

    async def send(self, message: Message) -> SendResult:
        if self.broken and message.address not in self.good:
            self.refused.append(message.address)
            raise bad_token()
        self.sent.append(message.address)
        return SendResult(self.name, f"apns-{message.delivery_id}")

    async def close(self) -> None:
        return None


def tokens(count: int) -> list[str]:
    return [f"{index:064x}" for index in range(1, count + 1)]


async def register_and_send(client: httpx.AsyncClient, devices: list[str]) -> None:
    """One iOS device per user through the API, then one push to each user."""
    await put_type(client, "app.alert", channels=("push",))
    for index, token in enumerate(devices):
        body = {"userId": f"u{index}", "platform": "ios", "token": token}
        response = await client.post("/v1/devices", json=body)
        assert response.status_code == 201, response.text
    items = [
        {"idempotencyKey": str(uuid.uuid4()), "type": "app.alert", "userId": f"u{index}"}
        for index in range(len(devices))
    ]
    response = await client.post("/v1/notifications/batch", json={"notifications": items})
    assert response.status_code == 200, response.text


def guarded(service: Service, **settings: Any) -> None:
    """Guard settings for this test (read when the dispatcher is built)."""
    update = {"deactivation_guard": DeactivationGuardSettings(**settings)}
    service.settings = service.settings.model_copy(update=update)


@contextlib.asynccontextmanager
async def dispatching(service: Service, provider: WrongEnvironment) -> AsyncIterator[Dispatcher]:
    async with running_dispatcher(service, provider) as dispatcher:
        yield dispatcher


async def deliveries(db: Database) -> list[dict[str, Any]]:
    columns = (delivery.c.address, delivery.c.status, delivery.c.attempts, delivery.c.last_error)
    async with db.engine.connect() as conn:
        return [dict(row._mapping) for row in await conn.execute(sa.select(*columns))]


async def deactivated(db: Database) -> dict[str, str | None]:
    query = sa.select(device.c.token, device.c.deactivated_reason).where(device.c.active.is_(False))
    async with db.engine.connect() as conn:
        return {row.token: row.deactivated_reason for row in await conn.execute(query)}


async def guard_shown(client: httpx.AsyncClient) -> dict[str, Any] | None:
    body = (await client.get("/v1/providers")).json()
    for account in body["accounts"]:
        if account["name"] == ACCOUNT:
            found: dict[str, Any] = account["deactivationGuard"]
            return found
    return None


async def guard_state(client: httpx.AsyncClient, state: str) -> dict[str, Any] | None:
    shown = await guard_shown(client)
    return shown if shown is not None and shown["state"] == state else None


async def settled(db: Database) -> list[dict[str, Any]] | None:
    """Every delivery PENDING (held, not being sent) or SENT."""
    rows = await deliveries(db)
    return None if any(r["status"] not in ("PENDING", "SENT") for r in rows) else rows


async def all_sent(db: Database) -> bool:
    return all(r["status"] == "SENT" for r in await deliveries(db))


def assert_held_not_failed(rows: list[dict[str, Any]]) -> None:
    held = [r for r in rows if r["status"] == "PENDING"]
    assert held, "nothing held"
    assert all(r["attempts"] == 0 for r in held), held  # no attempt used
    notes = {r["last_error"] for r in held}
    assert notes <= {held_note(ACCOUNT), "apns: 400 BadDeviceToken"}, notes


async def test_a_wrong_environment_trips_the_guard_and_deactivates_no_token(
    service: Service, client: httpx.AsyncClient, db: Database
) -> None:
    devices = tokens(40)
    provider = WrongEnvironment(good=set(devices[:4]))
    guarded(service, min_samples=10, window_seconds=5, hold_seconds=3600)
    await register_and_send(client, devices)
    async with dispatching(service, provider):
        shown = await eventually(lambda: guard_state(client, "tripped"), within=15)
        assert shown["reason"] == "BadDeviceToken"
        assert shown["share"] > 0.2 and shown["samples"] >= 10 and shown["trippedAt"]
        rows = await eventually(lambda: settled(db), within=10)
        assert provider.refused
        assert await deactivated(db) == {}
        assert_held_not_failed(rows)

        async def reported_held() -> bool:
            accounts = (await client.get("/v1/providers")).json()["accounts"]
            [mine] = [a for a in accounts if a["name"] == ACCOUNT]
            return bool(mine["breakers"][0]["state"]["deactivationGuard"]["state"] == "held")

        await eventually(reported_held, within=5)  # this dispatcher's own view

        provider.broken = False  # the build points at the right environment again
        response = await client.post(f"/v1/providers/{ACCOUNT}/deactivation-guard/reset")
        assert response.status_code == 200, response.text
        answer = response.json()
        assert answer["released"] > 0
        assert answer["deactivationGuard"]["state"] == "clear"
        assert answer["deactivationGuard"]["clearedBy"] == "operator"
        await eventually(lambda: all_sent(db), within=20)
    assert await deactivated(db) == {}
    assert sorted(set(provider.sent)) == sorted(devices)


async def test_the_hold_ends_in_probes_that_hold_again_until_the_fault_is_fixed(
    service: Service, client: httpx.AsyncClient, db: Database
) -> None:
    devices = tokens(30)
    provider = WrongEnvironment(good=set())
    guarded(service, min_samples=10, window_seconds=5, hold_seconds=1.5, probes=2)
    await register_and_send(client, devices)
    async with dispatching(service, provider):
        first = await eventually(lambda: guard_state(client, "tripped"), within=15)

        async def tripped_again() -> dict[str, Any] | None:
            shown = await guard_shown(client)
            later = shown is not None and shown["trippedAt"] != first["trippedAt"]
            return shown if later else None

        await eventually(tripped_again, within=15)  # the probes failed that way again
        assert await deactivated(db) == {}
        rows = await deliveries(db)
        assert not [r for r in rows if r["status"] == "FAILED"]
        assert all(r["attempts"] <= 1 for r in rows)  # at most a probe's, in flight

        provider.broken = False
        await eventually(lambda: all_sent(db), within=30)
        cleared = await eventually(lambda: guard_state(client, "clear"), within=5)
        assert cleared["clearedBy"] == "probes"
    assert await deactivated(db) == {}


async def test_a_few_dead_tokens_among_many_sends_are_deactivated(
    service: Service, client: httpx.AsyncClient, db: Database
) -> None:
    devices = tokens(40)
    dead = set(devices[5:8])
    provider = WrongEnvironment(good=set(devices) - dead)
    guarded(service, window_seconds=1)  # the default share and min_samples
    await register_and_send(client, devices)
    async with dispatching(service, provider):

        async def dead_ones_gone() -> dict[str, str | None] | None:
            found = await deactivated(db)
            return found if set(found) == dead else None

        gone = await eventually(dead_ones_gone, within=20)
        assert set(gone.values()) == {"BadDeviceToken"}
        await eventually(lambda: settled_failed(db, dead), within=10)
        shown = await guard_shown(client)
        assert shown is not None and shown["state"] == "clear" and shown["trippedAt"] is None
    # One more try each, a window after the first: then deactivated.
    assert sorted(provider.refused) == sorted(list(dead) * 2)


async def settled_failed(db: Database, dead: set[str]) -> bool:
    rows = await deliveries(db)
    failed = {r["address"] for r in rows if r["status"] == "FAILED"}
    return failed == dead and all(r["status"] in ("SENT", "FAILED") for r in rows)


async def test_the_reset_of_an_unknown_account_is_404(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/providers/nobody/deactivation-guard/reset")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
