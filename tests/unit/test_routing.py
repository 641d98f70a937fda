"""Routing a delivery to a provider account: the primary while its breaker is closed;
transactional email and SMS fail over down the chain when it is open; everything else is
deferred (attempt given back) until the breaker may probe; no rate token also defers."""

from __future__ import annotations

import pytest

from tidings.dispatch.protection.breaker import BreakerSettings, CircuitBreaker
from tidings.dispatch.protection.ratelimit import LocalRateLimiter
from tidings.dispatch.protection.routing import (
    MIN_BREAKER_DEFER,
    Defer,
    Send,
    Target,
    admit,
    route,
)
from tidings.priorities import Category, Channel, Priority

TRANSACTIONAL, REMINDER, MARKETING = Category.TRANSACTIONAL, Category.REMINDER, Category.MARKETING
EMAIL, SMS, PUSH = Channel.EMAIL, Channel.SMS, Channel.PUSH
CHAIN = ["primary", "backup", "last"]


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def breaker(clock: FakeClock) -> CircuitBreaker:
    return CircuitBreaker(BreakerSettings(consecutive_failures=1, open_seconds=15), clock=clock)


@pytest.mark.parametrize("channel", list(Channel))
@pytest.mark.parametrize("category", list(Category))
def test_the_primary_while_its_breaker_is_closed(
    breaker: CircuitBreaker, channel: Channel, category: Category
) -> None:
    assert route(channel, category, CHAIN, breaker) == Send("primary")


@pytest.mark.parametrize("channel", [EMAIL, SMS])
def test_transactional_email_and_sms_fail_over_down_the_chain(
    breaker: CircuitBreaker, channel: Channel
) -> None:
    breaker.record_failure("primary")
    assert route(channel, TRANSACTIONAL, CHAIN, breaker) == Send("backup", failover=True)
    breaker.record_failure("backup")
    assert route(channel, TRANSACTIONAL, CHAIN, breaker) == Send("last", failover=True)


@pytest.mark.parametrize(
    ("channel", "category"),
    [(PUSH, TRANSACTIONAL), (EMAIL, MARKETING), (EMAIL, REMINDER), (SMS, MARKETING)],
)
def test_everything_else_waits_for_the_primary(
    breaker: CircuitBreaker, clock: FakeClock, channel: Channel, category: Category
) -> None:
    breaker.record_failure("primary")
    clock.now += 5
    assert route(channel, category, CHAIN, breaker) == Defer(10.0, "breaker_open")
    assert breaker.state("backup").window_calls == 0  # the backup was not even asked


def test_all_open_defers_until_the_first_may_probe(
    breaker: CircuitBreaker, clock: FakeClock
) -> None:
    breaker.record_failure("primary")
    clock.now += 10
    breaker.record_failure("backup")
    breaker.record_failure("last")
    assert route(EMAIL, TRANSACTIONAL, CHAIN, breaker) == Defer(5.0, "breaker_open")
    clock.now += 5
    assert route(EMAIL, TRANSACTIONAL, CHAIN, breaker) == Send("primary")  # the probe


def test_half_open_sends_one_probe_to_the_primary(
    breaker: CircuitBreaker, clock: FakeClock
) -> None:
    breaker.record_failure("primary")
    clock.now += 15
    assert route(EMAIL, MARKETING, CHAIN, breaker) == Send("primary")
    # The probe is out: transactional goes to the backup, the rest waits a moment.
    assert route(EMAIL, TRANSACTIONAL, CHAIN, breaker) == Send("backup", failover=True)
    assert route(EMAIL, MARKETING, CHAIN, breaker) == Defer(MIN_BREAKER_DEFER, "breaker_open")
    breaker.record_success("primary")
    assert route(EMAIL, TRANSACTIONAL, CHAIN, breaker) == Send("primary")


def test_an_empty_chain_is_a_configuration_error(breaker: CircuitBreaker) -> None:
    with pytest.raises(ValueError, match="no provider account"):
        route(EMAIL, TRANSACTIONAL, [], breaker)


async def test_admit_sends_what_has_tokens_and_defers_the_rest(
    breaker: CircuitBreaker, clock: FakeClock
) -> None:
    limiter = LocalRateLimiter({"primary": 4.0, "backup": 100.0}, burst_seconds=0.5, clock=clock)
    targets = {
        "a": Target(EMAIL, MARKETING, CHAIN),
        "b": Target(EMAIL, MARKETING, CHAIN),
        "c": Target(EMAIL, TRANSACTIONAL, CHAIN),
        "d": Target(PUSH, TRANSACTIONAL, ["fcm"]),  # an account without a rate
    }
    admission = await admit(list(targets), Priority.HIGH, targets.__getitem__, breaker, limiter)
    assert admission.send == [("a", "primary"), ("b", "primary"), ("d", "fcm")]
    [(item, deferral)] = admission.defer
    assert item == "c"
    assert deferral.reason == "rate_limited"
    assert deferral.until_seconds == pytest.approx(0.25)  # one token at 4/s


async def test_admit_fails_over_and_defers_around_an_open_breaker(
    breaker: CircuitBreaker, clock: FakeClock
) -> None:
    limiter = LocalRateLimiter({}, clock=clock)
    breaker.record_failure("primary")
    targets = {"t": Target(SMS, TRANSACTIONAL, CHAIN), "m": Target(SMS, MARKETING, CHAIN)}
    admission = await admit(list(targets), Priority.LOW, targets.__getitem__, breaker, limiter)
    assert admission.send == [("t", "backup")]
    assert admission.defer == [("m", Defer(15.0, "breaker_open"))]


async def test_a_probe_without_a_token_is_given_back(
    breaker: CircuitBreaker, clock: FakeClock
) -> None:
    limiter = LocalRateLimiter({"primary": 1.0}, clock=clock)
    await limiter.pause("primary", 30)
    breaker.record_failure("primary")
    clock.now += 15
    targets = {"m": Target(EMAIL, MARKETING, CHAIN)}
    admission = await admit(list(targets), Priority.NORMAL, targets.__getitem__, breaker, limiter)
    assert admission.send == []
    [(_, deferral)] = admission.defer
    assert deferral.reason == "rate_limited"
    assert deferral.until_seconds == pytest.approx(15 + 1)  # the pause, then one token
    assert breaker.allow("primary")  # the probe slot is free again
