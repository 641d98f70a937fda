"""Properties of the rate limiter (docs/architecture.md, Lanes and reserved rate shares): the
account's rate is never exceeded over
any window, LOW and NORMAL keep to their shares, HIGH always finds headroom and gets what it
asks for up to the rate, and under saturation the rate is used."""

from __future__ import annotations

import random
from itertools import accumulate

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from tidings.dispatch.protection.ratelimit import (
    LocalRateLimiter,
    RateLimitSettings,
    claim_pause,
    ration,
)
from tidings.priorities import Priority

HIGH, NORMAL, LOW = Priority.HIGH, Priority.NORMAL, Priority.LOW
TOLERANCE = 1e-6


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


rates = st.floats(min_value=0.5, max_value=2000.0)
bursts = st.floats(min_value=0.05, max_value=1.0)
# One request: (time since the last one, in tokens' worth of the rate; priority; wanted).
requests = st.lists(
    st.tuples(
        st.floats(min_value=0.0, max_value=4.0),
        st.sampled_from(list(Priority)),
        st.integers(min_value=0, max_value=30),
    ),
    min_size=1,
    max_size=150,
)


def run(
    rate: float, burst: float, sequence: list[tuple[float, Priority, int]]
) -> tuple[LocalRateLimiter, list[tuple[float, Priority, int]]]:
    clock = FakeClock()
    limiter = LocalRateLimiter({"acct": rate}, burst_seconds=burst, clock=clock)
    grants = []
    for gap, priority, wanted in sequence:
        clock.now += gap / rate
        granted = limiter.try_acquire("acct", priority, wanted)
        assert 0 <= granted <= wanted
        grants.append((clock.now, priority, granted))
    return limiter, grants


def worst_excess(grants: list[tuple[float, int]], rate: float) -> float:
    """max over windows [t_i, t_j] of granted - rate * (t_j - t_i)."""
    totals = [0, *accumulate(n for _, n in grants)]
    worst = 0.0
    for i in range(len(grants)):
        for j in range(i, len(grants)):
            window = grants[j][0] - grants[i][0]
            worst = max(worst, totals[j + 1] - totals[i] - rate * window)
    return worst


@settings(max_examples=200, deadline=None)
@given(rates, bursts, requests)
def test_never_more_than_the_rate_plus_the_burst_in_any_window(
    rate: float, burst: float, sequence: list[tuple[float, Priority, int]]
) -> None:
    limiter, grants = run(rate, burst, sequence)
    capacity = limiter.capacity("acct")
    assert capacity == max(1.0, rate * burst)
    assert capacity <= max(1.0, rate)  # never above the simulator's bucket (one second's worth)
    everything = [(t, n) for t, _, n in grants]
    assert worst_excess(everything, rate) <= capacity + TOLERANCE


@settings(max_examples=200, deadline=None)
@given(rates, bursts, requests)
def test_low_and_normal_keep_to_their_shares_over_any_window(
    rate: float, burst: float, sequence: list[tuple[float, Priority, int]]
) -> None:
    limiter, grants = run(rate, burst, sequence)
    capacity = limiter.capacity("acct")
    assert capacity is not None
    low = [(t, n) for t, p, n in grants if p is LOW]
    assert worst_excess(low, 0.6 * rate) <= max(1.0, 0.6 * capacity) + TOLERANCE
    # NORMAL's cap covers NORMAL and LOW together: 10 % is always left to HIGH.
    below_high = [(t, n) for t, p, n in grants if p is not HIGH]
    assert worst_excess(below_high, 0.9 * rate) <= max(1.0, 0.9 * capacity) + TOLERANCE


@settings(max_examples=200, deadline=None)
@given(rates, bursts, requests.map(lambda seq: [(g, p, n) for g, p, n in seq if p is not HIGH]))
def test_high_always_finds_the_reserved_headroom(
    rate: float, burst: float, sequence: list[tuple[float, Priority, int]]
) -> None:
    limiter, _ = run(rate, burst, sequence)
    capacity = limiter.capacity("acct")
    assert capacity is not None
    headroom = int(0.1 * (capacity - 1) + 1e-9)
    assert limiter.try_acquire("acct", HIGH, 10**6) >= headroom


@settings(max_examples=40, deadline=None)
@given(
    st.floats(min_value=20.0, max_value=2000.0),
    bursts,
    st.floats(min_value=0.05, max_value=3.0),
    st.randoms(use_true_random=True),
)
def test_saturated_the_rate_is_used_and_high_gets_what_it_asks_up_to_the_rate(
    rate: float, burst: float, high_offer: float, rng: random.Random
) -> None:
    """NORMAL and LOW offer 3x the rate, HIGH ``high_offer`` times it; the three ask in a
    random order at random moments a fraction of a token apart."""
    if rate * burst < 10:
        rate = 10 / burst  # the headroom must hold at least one token
    clock = FakeClock()
    limiter = LocalRateLimiter({"acct": rate}, burst_seconds=burst, clock=clock)
    offered = {HIGH: high_offer, NORMAL: 3.0, LOW: 3.0}
    backlog = dict.fromkeys(Priority, 0.0)
    granted = dict.fromkeys(Priority, 0)
    start = clock.now
    for _ in range(2000):
        step = rng.uniform(0.0, 0.5) / rate
        clock.now += step
        order = list(Priority)
        rng.shuffle(order)
        for priority in order:
            backlog[priority] += offered[priority] * rate * step
            got = limiter.try_acquire("acct", priority, int(backlog[priority]))
            backlog[priority] -= got
            granted[priority] += got
    budget = rate * (clock.now - start)
    assert sum(granted.values()) >= 0.95 * budget
    high_asked = high_offer * budget
    if high_offer <= 1.0:
        assert backlog[HIGH] < 2  # everything it asked for, but the fraction of a token
    else:
        assert granted[HIGH] >= 0.95 * budget
    assert granted[HIGH] <= high_asked + 1


@pytest.mark.parametrize(("priority", "share"), [(LOW, 0.6), (NORMAL, 0.9), (HIGH, 1.0)])
def test_alone_a_priority_gets_its_share_of_the_rate(priority: Priority, share: float) -> None:
    clock = FakeClock()
    limiter = LocalRateLimiter({"acct": 100.0}, clock=clock)
    total = 0
    for _ in range(10_000):  # 100 s
        clock.now += 0.01
        total += limiter.try_acquire("acct", priority, 1000)
    assert share * 100 * 100 * 0.98 <= total <= share * 100 * 100 + 50


def test_burst_is_the_configured_part_of_a_second() -> None:
    limiter = LocalRateLimiter({"acct": 100.0}, burst_seconds=0.5, clock=FakeClock())
    assert limiter.try_acquire("acct", HIGH, 1000) == 50


@settings(max_examples=200, deadline=None)
@given(rates, bursts, requests, st.sampled_from(list(Priority)))
def test_next_token_in_is_when_a_token_comes(
    rate: float, burst: float, sequence: list[tuple[float, Priority, int]], priority: Priority
) -> None:
    clock = FakeClock()
    limiter = LocalRateLimiter({"acct": rate}, burst_seconds=burst, clock=clock)
    for gap, asking, wanted in sequence:
        clock.now += gap / rate
        limiter.try_acquire("acct", asking, wanted)
    while limiter.try_acquire("acct", priority, 1):
        pass
    wait = limiter.next_token_in("acct", priority)
    assert wait > 0
    clock.now += wait * 0.99 - 1e-6
    assert limiter.try_acquire("acct", priority, 1) == 0
    clock.now += wait * 0.01 + 2e-6
    assert limiter.next_token_in("acct", priority) == 0
    assert limiter.try_acquire("acct", priority, 1) == 1


async def test_unlimited_accounts_grant_everything() -> None:
    limiter = LocalRateLimiter({"acct": 1.0}, clock=FakeClock())
    assert await limiter.acquire("other", LOW, 10_000) == 10_000
    assert limiter.next_token_in("other", LOW) == 0
    assert await limiter.acquire("acct", LOW, 0) == 0


async def test_acquire_takes_what_there_is_without_waiting() -> None:
    clock = FakeClock()
    limiter = LocalRateLimiter({"acct": 10.0}, burst_seconds=1.0, clock=clock)
    assert await limiter.acquire("acct", HIGH, 4) == 4
    assert await limiter.acquire("acct", HIGH, 100) == 6
    assert await limiter.acquire("acct", HIGH, 1) == 0
    assert limiter.next_token_in("acct", HIGH) == pytest.approx(0.1)


async def test_pause_grants_nothing_for_that_long() -> None:
    clock = FakeClock()
    limiter = LocalRateLimiter({"acct": 10.0}, clock=clock)
    await limiter.pause("acct", 2.0)
    assert await limiter.acquire("acct", HIGH, 1) == 0
    assert limiter.next_token_in("acct", HIGH) == pytest.approx(2.1)
    clock.now += 2.0
    assert await limiter.acquire("acct", HIGH, 1) == 0
    clock.now += 0.1
    assert await limiter.acquire("acct", HIGH, 5) == 1


async def test_ration_and_claim_pause() -> None:
    clock = FakeClock()
    limiter = LocalRateLimiter({"a": 10.0, "b": 2.0}, burst_seconds=1.0, clock=clock)
    granted = await ration(limiter, HIGH, {"a": 30, "b": 3, "free": 7, "none": 0})
    assert granted == {"a": 10, "b": 2, "free": 7}
    assert claim_pause(limiter, HIGH, ["free"]) == 0
    assert claim_pause(limiter, HIGH, ["a", "b"]) == pytest.approx(0.1)
    assert claim_pause(limiter, HIGH, ["b"]) == pytest.approx(0.5)


def test_settings_validate_shares() -> None:
    defaults = RateLimitSettings()
    assert defaults.shares == {LOW: 0.6, NORMAL: 0.9, HIGH: 1.0}
    assert RateLimitSettings(shares={"low": 0.5}).shares[LOW] == 0.5  # type: ignore[dict-item]
    with pytest.raises(ValidationError):
        RateLimitSettings(shares={LOW: 0.95})
    with pytest.raises(ValidationError):
        RateLimitSettings(shares={HIGH: 0.0})
    limiter = LocalRateLimiter.from_settings(defaults, {"a": 5.0, "b": None})
    assert limiter.capacity("a") == 2.5
    assert limiter.capacity("b") is None
