"""A circuit breaker per provider account (docs/architecture.md, Providers, failover and the
circuit breaker).

States: CLOSED (calls flow) -> OPEN after ``consecutive_failures`` transient failures in a
row, or when at least ``min_calls`` calls in the last ``window_seconds`` (counted per
whole second of the clock) failed at a ratio of
``failure_ratio`` or more. OPEN refuses calls for the open time, then becomes HALF_OPEN, which
lets ONE probe through at a time: its success closes the breaker, its failure re-opens it
for twice as long as before (up to ``max_open_seconds``). A probe nobody reports on within
``probe_timeout_seconds`` (a cancelled task) is given up, so the breaker cannot stick.

What counts (``counts_against``): only the provider's own trouble, that is a transient error
(connection error, timeout, 5xx, an adapter's unexpected exception). Permanent and poison
errors (a bad address, a template too large) are the message's fault and never trip it; they
also prove the provider answered, so they count as successes for the window.

429 / throttling is **neutral** (``record_throttled``): it proves the provider is up and
protecting itself, which is a rate problem, not an outage. Opening the breaker on it would
defer every non-transactional delivery for the open time and push transactional traffic onto
the backup account, turning a brief over-rate into a failover. The answer to a 429 is to slow
down: the retry policy honours its Retry-After and the lead feeds it to
``RateLimiter.pause`` so that every lane slows down for that account. In HALF_OPEN a throttled
probe only frees the probe slot.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field

from tidings.providers.base import ProviderError
from tidings.states import FailureKind

# ProviderError.reason values that mean "too many requests" (documented 429s, see
# reference/providers.md); adapters should say reason="rate_limited" for any other 429.
THROTTLE_REASONS = frozenset(
    {
        "rate_limited",
        "http_429",
        "429",
        "TooManyRequests",
        "TooManyProviderTokenUpdates",
        "QUOTA_EXCEEDED",
        "20429",
        "rate_limited_route",
    }
)
# Throttles of one route (one Discord webhook, say), not of the account: neutral for the
# breaker, and they delay only their delivery, never the account's other sends.
ROUTE_THROTTLE_REASONS = frozenset({"rate_limited_route"})


class BreakerSettings(BaseModel):
    consecutive_failures: int = Field(default=5, ge=1, le=1000)
    failure_ratio: float = Field(default=0.5, gt=0, le=1)
    min_calls: int = Field(default=20, ge=1)
    window_seconds: float = Field(default=30.0, gt=0, le=3600)
    open_seconds: float = Field(default=15.0, gt=0, le=3600)
    max_open_seconds: float = Field(default=120.0, gt=0, le=86400)
    probe_timeout_seconds: float = Field(default=30.0, gt=0, le=3600)


class BreakerStatus(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


@dataclass(frozen=True)
class BreakerState:
    """One account's breaker as seen now; times are the breaker's clock (monotonic)."""

    status: BreakerStatus
    failures: int  # consecutive transient failures
    window_calls: int
    window_failures: int
    opened_at: float | None
    retry_at: float | None  # when OPEN: when a probe may go


def counts_against(error: BaseException) -> bool | None:
    """True: a provider failure for the breaker; False: the provider answered (success for
    the breaker); None: throttled (neutral)."""
    if isinstance(error, ProviderError):
        if error.kind is not FailureKind.TRANSIENT:
            return False
        if error.reason in THROTTLE_REASONS:
            return None
    return True


@dataclass
class _Account:
    status: BreakerStatus = BreakerStatus.CLOSED
    failures: int = 0
    # (second, calls, failures) per whole second of the clock, oldest first.
    window: deque[list[int]] = field(default_factory=deque)
    opened_at: float | None = None
    retry_at: float | None = None
    open_for: float = 0.0
    probe_since: float | None = None
    forced: bool = False  # opened because another dispatcher's breaker did


class CircuitBreaker:
    def __init__(
        self,
        settings: BreakerSettings | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings or BreakerSettings()
        self._clock = clock
        self._accounts: dict[str, _Account] = {}

    def _get(self, account: str) -> _Account:
        state = self._accounts.get(account)
        if state is None:
            state = self._accounts[account] = _Account()
        return state

    def allow(self, account: str) -> bool:
        """May a call go to ``account`` now? In HALF_OPEN a True reserves the one probe:
        report its result (``record_*``) or ``cancel`` it if it is not sent after all."""
        state = self._get(account)
        now = self._clock()
        self._advance(state, now)
        if state.status is BreakerStatus.CLOSED:
            return True
        if state.status is BreakerStatus.OPEN:
            return False
        if state.probe_since is not None:
            if now - state.probe_since < self.settings.probe_timeout_seconds:
                return False
        state.probe_since = now
        return True

    def would_allow(self, account: str) -> bool:
        """``allow`` without reserving a probe."""
        state = self._get(account)
        now = self._clock()
        self._advance(state, now)
        if state.status is BreakerStatus.HALF_OPEN and state.probe_since is not None:
            return now - state.probe_since >= self.settings.probe_timeout_seconds
        return state.status is not BreakerStatus.OPEN

    def force_open(self, account: str, seconds: float) -> None:
        """Open (or keep open) for ``seconds``: another dispatcher saw the outage."""
        state = self._get(account)
        now = self._clock()
        self._advance(state, now)
        if state.status is BreakerStatus.OPEN and (state.retry_at or 0) >= now + seconds:
            return
        if state.status is not BreakerStatus.OPEN:
            self._open(state, now, seconds)
        else:
            state.retry_at = now + seconds
        state.forced = True

    def trip(self, account: str) -> None:
        """Open a closed breaker as its own count would (the fleet's run of failures did,
        dispatch/protection/breaker_share.py): an opening of its own, which the others follow."""
        state = self._get(account)
        now = self._clock()
        self._advance(state, now)
        if state.status is BreakerStatus.CLOSED:
            settings = self.settings
            self._open(state, now, min(settings.open_seconds, settings.max_open_seconds))

    def forced(self, account: str) -> bool:
        """Whether the account is open because another dispatcher said so."""
        return self._get(account).forced

    def cancel(self, account: str) -> None:
        """The call ``allow`` admitted was not made (no rate token, shutdown): free the probe."""
        self._get(account).probe_since = None

    def record_success(self, account: str) -> None:
        state = self._get(account)
        now = self._clock()
        self._advance(state, now)
        if state.status is BreakerStatus.HALF_OPEN:
            self._close(state)
        elif state.status is BreakerStatus.CLOSED:
            state.failures = 0
            self._count(state, now, failed=False)
        # OPEN: a call started before the breaker opened; it proves little.

    def record_failure(self, account: str) -> None:
        """A transient provider failure (see ``counts_against``)."""
        state = self._get(account)
        now = self._clock()
        self._advance(state, now)
        if state.status is BreakerStatus.HALF_OPEN:
            self._open(state, now, min(state.open_for * 2, self.settings.max_open_seconds))
        elif state.status is BreakerStatus.CLOSED:
            state.failures += 1
            self._count(state, now, failed=True)
            if self._tripped(state):
                settings = self.settings
                self._open(state, now, min(settings.open_seconds, settings.max_open_seconds))

    def record_throttled(self, account: str) -> None:
        """A 429: neutral, but a throttled probe frees the probe slot."""
        state = self._get(account)
        if state.status is BreakerStatus.HALF_OPEN:
            state.probe_since = None

    def record(self, account: str, error: BaseException | None) -> None:
        """Report the outcome of a call: ``None`` for success, else the exception raised."""
        verdict = None if error is None else counts_against(error)
        if error is None or verdict is False:
            self.record_success(account)
        elif verdict is None:
            self.record_throttled(account)
        else:
            self.record_failure(account)

    def state(self, account: str) -> BreakerState:
        state = self._get(account)
        now = self._clock()
        self._advance(state, now)
        self._trim(state, now)
        return BreakerState(
            status=state.status,
            failures=state.failures,
            window_calls=sum(entry[1] for entry in state.window),
            window_failures=sum(entry[2] for entry in state.window),
            opened_at=state.opened_at,
            retry_at=state.retry_at,
        )

    def retry_in(self, account: str) -> float:
        """Seconds until ``allow`` may say yes: the rest of the open time; 0 when closed or
        half-open (with a probe out, its answer may come any moment: callers put a floor)."""
        state = self._get(account)
        now = self._clock()
        self._advance(state, now)
        if state.status is BreakerStatus.OPEN and state.retry_at is not None:
            return max(0.0, state.retry_at - now)
        return 0.0

    def snapshot(self) -> dict[str, dict[str, Any]]:
        """Every known account's breaker, JSON-ready, with times relative to now."""
        now = self._clock()
        out: dict[str, dict[str, Any]] = {}
        for account in sorted(self._accounts):
            seen = self.state(account)
            out[account] = {
                "state": seen.status.value,
                "consecutiveFailures": seen.failures,
                "windowCalls": seen.window_calls,
                "windowFailures": seen.window_failures,
                "openedSecondsAgo": None if seen.opened_at is None else now - seen.opened_at,
                "retryInSeconds": (
                    None if seen.status is BreakerStatus.CLOSED else self.retry_in(account)
                ),
                # Opened because another dispatcher's breaker did: not passed on again.
                "forced": seen.status is not BreakerStatus.CLOSED and self.forced(account),
            }
        return out

    def _advance(self, state: _Account, now: float) -> None:
        """OPEN becomes HALF_OPEN once its time is up."""
        if (
            state.status is BreakerStatus.OPEN
            and state.retry_at is not None
            and now >= state.retry_at
        ):
            state.status = BreakerStatus.HALF_OPEN
            state.probe_since = None

    def _open(self, state: _Account, now: float, open_for: float) -> None:
        state.forced = False
        state.status = BreakerStatus.OPEN
        state.open_for = open_for
        state.opened_at = now
        state.retry_at = now + open_for
        state.probe_since = None

    def _close(self, state: _Account) -> None:
        state.status = BreakerStatus.CLOSED
        state.failures = 0
        state.window.clear()
        state.opened_at = state.retry_at = state.probe_since = None
        state.open_for = 0.0

    def _count(self, state: _Account, now: float, *, failed: bool) -> None:
        second = int(now // 1)
        if state.window and state.window[-1][0] == second:
            entry = state.window[-1]
        else:
            entry = [second, 0, 0]
            state.window.append(entry)
        entry[1] += 1
        entry[2] += int(failed)
        self._trim(state, now)

    def _trim(self, state: _Account, now: float) -> None:
        oldest = now - self.settings.window_seconds
        while state.window and state.window[0][0] + 1 <= oldest:
            state.window.popleft()

    def _tripped(self, state: _Account) -> bool:
        settings = self.settings
        if state.failures >= settings.consecutive_failures:
            return True
        calls = sum(entry[1] for entry in state.window)
        failures = sum(entry[2] for entry in state.window)
        return calls >= settings.min_calls and failures >= settings.failure_ratio * calls
