"""The circuit breaker per provider account: a state machine over a fake clock. Only legal
transitions, one probe at a time when half-open, and errors that are not the provider's
(permanent, poison, throttling) never open it."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from tidings.dispatch.protection.breaker import (
    BreakerSettings,
    BreakerStatus,
    CircuitBreaker,
    counts_against,
)
from tidings.providers.base import PermanentError, PoisonError, TransientError

CLOSED, OPEN, HALF_OPEN = BreakerStatus.CLOSED, BreakerStatus.OPEN, BreakerStatus.HALF_OPEN
LEGAL = {
    (CLOSED, CLOSED),
    (CLOSED, OPEN),
    (OPEN, OPEN),
    (OPEN, HALF_OPEN),
    (HALF_OPEN, HALF_OPEN),
    (HALF_OPEN, CLOSED),
    (HALF_OPEN, OPEN),
}
SETTINGS = BreakerSettings(
    consecutive_failures=3,
    failure_ratio=0.5,
    min_calls=6,
    window_seconds=10,
    open_seconds=5,
    max_open_seconds=20,
    probe_timeout_seconds=8,
)
ACCOUNT = "sendgrid-main"


class FakeClock:
    def __init__(self) -> None:
        self.now = 500.0

    def __call__(self) -> float:
        return self.now


not_the_providers_fault = st.sampled_from(
    [
        PermanentError("invalid address"),
        PoisonError("payload too large"),
        TransientError("429", reason="rate_limited", retry_after=1.0),
        TransientError("429", reason="TooManyRequests"),
    ]
)
providers_fault = st.sampled_from(
    [TransientError("503"), TimeoutError(), ConnectionError("refused"), RuntimeError("bug")]
)


class BreakerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock()
        self.breaker = CircuitBreaker(SETTINGS, clock=self.clock)
        self.status = CLOSED
        self.consecutive = 0  # transient failures in a row while closed
        self.probe_at: float | None = None  # when the outstanding probe was let through
        self.open_for: float | None = None

    def observe(self) -> BreakerStatus:
        status = self.breaker.state(ACCOUNT).status
        assert (self.status, status) in LEGAL, f"{self.status} -> {status}"
        if status is not HALF_OPEN:
            self.probe_at = None
        if status is not CLOSED:
            self.consecutive = 0
        self.status = status
        return status

    @rule(seconds=st.floats(min_value=0.0, max_value=12.0))
    def advance(self, seconds: float) -> None:
        self.clock.now += seconds

    @rule()
    def allow(self) -> None:
        before = self.observe()
        allowed = self.breaker.allow(ACCOUNT)
        assert self.breaker.state(ACCOUNT).status is before  # asking changes nothing else
        if before is CLOSED:
            assert allowed
        elif before is OPEN:
            assert not allowed
        elif allowed:
            probe_out = self.probe_at is not None
            timed_out = (
                probe_out and self.clock.now - self.probe_at >= SETTINGS.probe_timeout_seconds  # type: ignore[operator]
            )
            assert not probe_out or timed_out, "a second probe while one is out"
            self.probe_at = self.clock.now
        else:
            assert self.probe_at is not None, "half-open refused with no probe out"

    @rule()
    def cancel(self) -> None:
        self.observe()
        self.breaker.cancel(ACCOUNT)
        self.probe_at = None

    @rule()
    def success(self) -> None:
        before = self.observe()
        self.breaker.record(ACCOUNT, None)
        after = self.observe()
        assert after is (CLOSED if before is HALF_OPEN else before)
        if after is CLOSED:
            self.consecutive = 0

    @rule(error=not_the_providers_fault)
    def not_a_provider_failure(self, error: Exception) -> None:
        before = self.observe()
        self.breaker.record(ACCOUNT, error)
        after = self.observe()
        assert after is not OPEN or before is OPEN, "opened by an error that is not an outage"
        if before is HALF_OPEN and after is HALF_OPEN:
            self.probe_at = None  # a throttled probe frees the slot
        if counts_against(error) is False and after is CLOSED:
            self.consecutive = 0

    @rule(error=providers_fault)
    def failure(self, error: Exception) -> None:
        before = self.observe()
        breaker_state = self.breaker.state(ACCOUNT)
        self.breaker.record(ACCOUNT, error)
        after = self.observe()
        state = self.breaker.state(ACCOUNT)
        if before is CLOSED:
            self.consecutive += 1
            if self.consecutive >= SETTINGS.consecutive_failures:
                assert after is OPEN
            if after is OPEN:
                assert state.retry_at == pytest.approx(self.clock.now + SETTINGS.open_seconds)
                self.open_for = SETTINGS.open_seconds
        elif before is HALF_OPEN:
            assert after is OPEN
            assert self.open_for is not None
            self.open_for = min(2 * self.open_for, SETTINGS.max_open_seconds)
            assert state.retry_at == pytest.approx(self.clock.now + self.open_for)
        else:
            assert state.retry_at == breaker_state.retry_at  # a late failure changes nothing

    @invariant()
    def consistent(self) -> None:
        status = self.observe()
        state = self.breaker.state(ACCOUNT)
        if status is OPEN:
            assert state.retry_at is not None and state.opened_at is not None
            assert state.opened_at <= self.clock.now < state.retry_at
            open_for = state.retry_at - state.opened_at
            assert SETTINGS.open_seconds - 1e-9 <= open_for <= SETTINGS.max_open_seconds + 1e-9
            assert self.breaker.retry_in(ACCOUNT) == pytest.approx(state.retry_at - self.clock.now)
        else:
            assert self.breaker.retry_in(ACCOUNT) == 0
        if status is CLOSED:
            assert state.failures < SETTINGS.consecutive_failures
        assert ACCOUNT in self.breaker.snapshot()


BreakerMachine.TestCase.settings = settings(max_examples=300, stateful_step_count=60, deadline=None)
TestBreakerMachine = BreakerMachine.TestCase


@given(
    st.lists(
        st.tuples(
            st.floats(min_value=0, max_value=5), st.one_of(st.none(), not_the_providers_fault)
        ),
        max_size=200,
    )
)
def test_errors_that_are_not_outages_never_open_it(
    events: list[tuple[float, Exception | None]],
) -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(SETTINGS, clock=clock)
    for gap, error in events:
        clock.now += gap
        assert breaker.allow(ACCOUNT)
        breaker.record(ACCOUNT, error)
    assert breaker.state(ACCOUNT).status is CLOSED


def test_opens_after_consecutive_failures_then_probes_once_and_closes() -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(clock=clock)  # defaults: 5 in a row, open 15 s
    for _ in range(4):
        breaker.record_failure(ACCOUNT)
    breaker.record_success(ACCOUNT)
    for _ in range(4):
        breaker.record_failure(ACCOUNT)
    assert breaker.state(ACCOUNT).status is CLOSED  # a success broke the run
    breaker.record_failure(ACCOUNT)
    state = breaker.state(ACCOUNT)
    assert state.status is OPEN and state.retry_at == clock.now + 15
    assert not breaker.allow(ACCOUNT)
    clock.now += 15
    assert breaker.allow(ACCOUNT)  # the probe
    assert not breaker.allow(ACCOUNT)  # only one at a time
    breaker.record_success(ACCOUNT)
    assert breaker.state(ACCOUNT).status is CLOSED
    assert breaker.allow(ACCOUNT) and breaker.allow(ACCOUNT)


def test_opens_on_the_failure_ratio_over_the_window() -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(clock=clock)  # 50 % of at least 20 calls in 30 s
    for _ in range(9):
        breaker.record_failure(ACCOUNT)
        breaker.record_success(ACCOUNT)
        clock.now += 1
    breaker.record_failure(ACCOUNT)
    assert breaker.state(ACCOUNT).status is CLOSED  # 10 of 19: too few calls yet
    breaker.record_success(ACCOUNT)
    breaker.record_failure(ACCOUNT)
    assert breaker.state(ACCOUNT).status is OPEN  # 11 of 21


def test_the_window_forgets_old_calls() -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(clock=clock)
    for index in range(20):
        if index % 2 and index < 18:
            breaker.record_failure(ACCOUNT)
        else:
            breaker.record_success(ACCOUNT)
    assert breaker.state(ACCOUNT).window_failures == 9  # 45 %: still closed
    clock.now += 31
    for _ in range(4):
        breaker.record_failure(ACCOUNT)
    breaker.record_success(ACCOUNT)
    breaker.record_failure(ACCOUNT)
    # With the old calls it would be 14 of 26, over the ratio.
    assert breaker.state(ACCOUNT).window_calls == 6
    assert breaker.state(ACCOUNT).status is CLOSED


def test_failed_probes_reopen_for_longer_up_to_the_cap() -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(BreakerSettings(consecutive_failures=1), clock=clock)
    breaker.record_failure(ACCOUNT)
    waits = []
    for _ in range(6):
        wait = breaker.retry_in(ACCOUNT)
        waits.append(wait)
        clock.now += wait
        assert breaker.allow(ACCOUNT)
        breaker.record_failure(ACCOUNT)
    assert waits == [15, 30, 60, 120, 120, 120]
    clock.now += breaker.retry_in(ACCOUNT)
    assert breaker.allow(ACCOUNT)
    breaker.record_success(ACCOUNT)
    breaker.record_failure(ACCOUNT)
    assert breaker.retry_in(ACCOUNT) == 15  # closing forgot the growth


def test_a_lost_probe_is_given_up_after_the_probe_timeout() -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(BreakerSettings(consecutive_failures=1), clock=clock)
    breaker.record_failure(ACCOUNT)
    clock.now += 15
    assert breaker.allow(ACCOUNT)
    clock.now += 29
    assert not breaker.allow(ACCOUNT)
    clock.now += 1
    assert breaker.allow(ACCOUNT)
    breaker.cancel(ACCOUNT)
    assert breaker.allow(ACCOUNT)


def test_snapshot_is_json_ready() -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(BreakerSettings(consecutive_failures=2), clock=clock)
    breaker.record_failure("a")
    breaker.record_failure("a")
    breaker.record_success("b")
    clock.now += 5
    assert breaker.snapshot() == {
        "a": {
            "state": "open",
            "consecutiveFailures": 2,
            "windowCalls": 2,
            "windowFailures": 2,
            "openedSecondsAgo": 5.0,
            "retryInSeconds": 10.0,
            "forced": False,
        },
        "b": {
            "state": "closed",
            "consecutiveFailures": 0,
            "windowCalls": 1,
            "windowFailures": 0,
            "openedSecondsAgo": None,
            "retryInSeconds": None,
            "forced": False,
        },
    }
