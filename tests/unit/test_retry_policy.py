"""Properties of the retry policy (docs/architecture.md, Delivery state machine): exponential
backoff with full jitter, a cap,
a maximum of attempts, Retry-After winning, and the failure kinds that are never retried."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from statistics import fmean

from hypothesis import given
from hypothesis import strategies as st

from tidings.api.schemas import RetryOverrides
from tidings.dispatch.pipeline.retry import MAX_RETRY_AFTER, RetryPolicy, RetrySettings
from tidings.states import FailureKind

# One microsecond: timedelta(seconds=x) rounds x to the nearest microsecond.
TICK = timedelta(microseconds=1)

# Hypothesis picks every draw of these (0, the ceiling, anything between): bounds must hold
# whatever a random number generator returns.
adversarial_rngs = st.randoms(use_true_random=False)
# A real random.Random seeded by Hypothesis (reproducible): for distribution properties.
seeded_rngs = st.randoms(use_true_random=True)
delays = st.floats(min_value=0.001, max_value=3600.0, allow_nan=False, allow_infinity=False)
caps = st.floats(min_value=0.001, max_value=86400.0, allow_nan=False, allow_infinity=False)
policies = st.builds(
    RetryPolicy,
    base_delay=delays,
    max_delay=caps,
    max_attempts=st.integers(min_value=1, max_value=100),
)
instants = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
)
retry_afters = st.floats(min_value=0.0, max_value=7 * 86400.0, allow_nan=False)
never_retried = st.sampled_from([FailureKind.PERMANENT, FailureKind.POISON, FailureKind.EXHAUSTED])


def ceiling(policy: RetryPolicy, attempt: int) -> float:
    """The spec's backoff ceiling after failed attempt ``attempt``: min(cap, base * 2^(n-1))."""
    return min(policy.max_delay, policy.base_delay * 2.0 ** (attempt - 1))


def clone(rng: random.Random) -> random.Random:
    twin = random.Random()
    twin.setstate(rng.getstate())
    return twin


def test_defaults_are_2s_5min_6_attempts() -> None:
    policy = RetryPolicy()
    assert (policy.base_delay, policy.max_delay, policy.max_attempts) == (2.0, 300.0, 6)
    # The dispatcher builds its policy from the settings: their defaults must agree.
    assert RetryPolicy(**RetrySettings().model_dump()) == policy


@given(policy=policies, attempt=st.integers(min_value=1, max_value=200), rng=adversarial_rngs)
def test_backoff_is_within_zero_and_the_capped_exponential(
    policy: RetryPolicy, attempt: int, rng: random.Random
) -> None:
    delay = policy.backoff(attempt, rng)
    assert 0.0 <= delay <= ceiling(policy, attempt)


@given(
    policy=policies,
    attempt=st.integers(min_value=64, max_value=10**18),
    rng=adversarial_rngs,
)
def test_backoff_respects_the_cap_for_huge_attempt_numbers(
    policy: RetryPolicy, attempt: int, rng: random.Random
) -> None:
    delay = policy.backoff(attempt, rng)
    assert 0.0 <= delay <= policy.max_delay


@given(policy=policies, attempt=st.integers(min_value=1, max_value=40), rng=seeded_rngs)
def test_full_jitter_spreads_over_the_whole_window(
    policy: RetryPolicy, attempt: int, rng: random.Random
) -> None:
    top = ceiling(policy, attempt)
    draws = [policy.backoff(attempt, rng) for _ in range(1000)]
    assert len(set(draws)) > 900, "jitter is (nearly) constant"
    # Full jitter is uniform on [0, ceiling]: both ends are reached, not [ceiling/2, ceiling]
    # ("equal jitter") nor a narrow band. Each bound fails with probability (3/4)^1000.
    assert min(draws) < top / 4
    assert max(draws) > 3 * top / 4
    assert abs(fmean(draws) - top / 2) < top / 10


@given(
    base=st.floats(min_value=0.01, max_value=10.0),
    attempt=st.integers(min_value=1, max_value=10),
    rng=seeded_rngs,
)
def test_backoff_window_doubles_per_attempt_until_the_cap(
    base: float, attempt: int, rng: random.Random
) -> None:
    policy = RetryPolicy(base_delay=base, max_delay=base * 2**20, max_attempts=50)
    previous_top = base * 2 ** (attempt - 1)
    draws = [policy.backoff(attempt + 1, rng) for _ in range(200)]
    # The next window is twice as wide: about half its draws land beyond the previous one.
    assert max(draws) > previous_top
    assert max(draws) <= 2 * previous_top


@given(
    policy=policies,
    data=st.data(),
    now=instants,
    rng=seeded_rngs,
)
def test_transient_with_attempts_left_is_retried_after_the_backoff(
    policy: RetryPolicy, data: st.DataObject, now: datetime, rng: random.Random
) -> None:
    if policy.max_attempts == 1:
        policy = RetryPolicy(policy.base_delay, policy.max_delay, 2)
    attempts = data.draw(st.integers(min_value=1, max_value=policy.max_attempts - 1))
    expected_delay = policy.backoff(attempts, clone(rng))

    decision = policy.decide(attempts, FailureKind.TRANSIENT, now, rng)

    assert decision.failure_kind is None
    assert decision.retry_at is not None
    assert decision.retry_at == now + timedelta(seconds=expected_delay)
    assert now <= decision.retry_at <= now + timedelta(seconds=ceiling(policy, attempts)) + TICK


@given(
    policy=policies,
    extra=st.integers(min_value=0, max_value=1000),
    now=instants,
    rng=adversarial_rngs,
    retry_after=st.none() | retry_afters,
)
def test_transient_at_max_attempts_is_exhausted(
    policy: RetryPolicy,
    extra: int,
    now: datetime,
    rng: random.Random,
    retry_after: float | None,
) -> None:
    decision = policy.decide(
        policy.max_attempts + extra, FailureKind.TRANSIENT, now, rng, retry_after
    )
    assert decision.retry_at is None
    assert decision.failure_kind is FailureKind.EXHAUSTED


@given(
    policy=policies,
    kind=never_retried,
    attempts=st.integers(min_value=0, max_value=1000),
    now=instants,
    rng=adversarial_rngs,
    retry_after=st.none() | retry_afters,
)
def test_permanent_poison_and_exhausted_are_never_retried(
    policy: RetryPolicy,
    kind: FailureKind,
    attempts: int,
    now: datetime,
    rng: random.Random,
    retry_after: float | None,
) -> None:
    decision = policy.decide(attempts, kind, now, rng, retry_after)
    assert decision.retry_at is None
    assert decision.failure_kind is kind


@given(
    policy=policies, data=st.data(), now=instants, rng=adversarial_rngs, retry_after=retry_afters
)
def test_retry_after_wins_over_the_backoff(
    policy: RetryPolicy,
    data: st.DataObject,
    now: datetime,
    rng: random.Random,
    retry_after: float,
) -> None:
    if policy.max_attempts == 1:
        policy = RetryPolicy(policy.base_delay, policy.max_delay, 2)
    attempts = data.draw(st.integers(min_value=1, max_value=policy.max_attempts - 1))

    decision = policy.decide(attempts, FailureKind.TRANSIENT, now, rng, retry_after)

    # Even beyond the cap, or shorter than any backoff: the provider knows best.
    assert decision.failure_kind is None
    assert decision.retry_at == now + timedelta(seconds=retry_after)


@given(
    policy=policies,
    attempts=st.integers(min_value=0, max_value=200),
    kind=st.sampled_from(FailureKind),
    now=instants,
    rng=adversarial_rngs,
    retry_after=st.none() | st.floats(min_value=-1e6, max_value=1e6),
)
def test_a_decision_is_either_a_retry_not_in_the_past_or_a_failure(
    policy: RetryPolicy,
    attempts: int,
    kind: FailureKind,
    now: datetime,
    rng: random.Random,
    retry_after: float | None,
) -> None:
    decision = policy.decide(attempts, kind, now, rng, retry_after)
    assert (decision.retry_at is None) != (decision.failure_kind is None)
    if decision.retry_at is not None:
        assert decision.retry_at >= now
    else:
        assert decision.failure_kind is not FailureKind.TRANSIENT


@given(
    policy=policies,
    base=st.none() | delays,
    cap=st.none() | caps,
    max_attempts=st.none() | st.integers(min_value=1, max_value=100),
)
def test_with_overrides_takes_camel_case_keys_and_keeps_the_rest(
    policy: RetryPolicy, base: float | None, cap: float | None, max_attempts: int | None
) -> None:
    overrides = {
        key: value
        for key, value in {"baseDelay": base, "maxDelay": cap, "maxAttempts": max_attempts}.items()
        if value is not None
    }
    result = policy.with_overrides(overrides)
    assert result.base_delay == (policy.base_delay if base is None else base)
    assert result.max_delay == (policy.max_delay if cap is None else cap)
    assert result.max_attempts == (policy.max_attempts if max_attempts is None else max_attempts)


@given(policy=policies)
def test_no_overrides_is_the_same_policy(policy: RetryPolicy) -> None:
    assert policy.with_overrides(None) == policy
    assert policy.with_overrides({}) == policy


@given(
    overrides=st.fixed_dictionaries(
        {
            "max_attempts": st.none() | st.integers(min_value=1, max_value=100),
            "base_delay": st.none() | st.floats(min_value=0.001, max_value=3600),
            "max_delay": st.none() | st.floats(min_value=0.001, max_value=86400),
        }
    )
    # The API refuses a maxDelay below baseDelay.
    .filter(
        lambda o: None in (o["base_delay"], o["max_delay"]) or o["max_delay"] >= o["base_delay"]
    )
    .map(lambda o: RetryOverrides(**o)),
    now=instants,
    rng=adversarial_rngs,
)
def test_type_overrides_as_the_api_stores_them_drive_the_decision(
    overrides: RetryOverrides, now: datetime, rng: random.Random
) -> None:
    # The registry stores a type's overrides with model_dump(by_alias=True, exclude_none=True).
    stored = overrides.model_dump(by_alias=True, exclude_none=True)
    policy = RetryPolicy().with_overrides(stored)
    assert policy.max_attempts == (overrides.max_attempts or 6)
    assert policy.base_delay == (overrides.base_delay or 2.0)
    assert policy.max_delay == (overrides.max_delay or 300.0)

    last = policy.decide(policy.max_attempts, FailureKind.TRANSIENT, now, rng)
    assert last.failure_kind is FailureKind.EXHAUSTED
    if policy.max_attempts > 1:
        first = policy.decide(1, FailureKind.TRANSIENT, now, rng)
        assert first.retry_at is not None
        assert first.retry_at <= now + timedelta(seconds=min(policy.base_delay, policy.max_delay))


@given(retry_after=st.floats(min_value=7 * 86400.0) | st.just(float("nan")), now=instants)
def test_an_absurd_retry_after_is_clamped_not_a_crash(retry_after: float, now: datetime) -> None:
    policy = RetryPolicy()
    decision = policy.decide(1, FailureKind.TRANSIENT, now, random.Random(0), retry_after)
    assert decision.retry_at is not None
    assert decision.retry_at - now <= timedelta(seconds=MAX_RETRY_AFTER)
