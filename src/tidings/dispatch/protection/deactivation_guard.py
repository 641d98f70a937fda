"""The mass deactivation guard per push account (docs/providers.md, Mass deactivation guard).

A push token the provider calls invalid is deactivated. Some of those answers come for
every token at once when our own configuration is wrong: a build pointed at the other APNs
environment or topic (``BadDeviceToken``, ``DeviceTokenNotForTopic``), or at another FCM
project (``INVALID_ARGUMENT`` on ``message.token``). One in a while is a dead token; many in
a minute are a misconfiguration, and deactivating on them would unregister every user.
APNs ``Unregistered`` and FCM ``UNREGISTERED`` are always one token's news: not concerned.

Per account, over a sliding window of ``window_seconds`` (the current whole second of the
clock and the ones before it), the guard counts sends and sends that would deactivate for
one of these configuration-shaped reasons. With at least ``min_samples`` sends in the window
and more than ``share`` of them deactivating, it trips: the account's push is held
(deferred without using attempts, like an open breaker) for ``hold_seconds``; then
``probes`` sends go through, as a half-open breaker's probes: one that fails that way again
holds the account again, ``probes`` that do not clear it. An operator's reset clears it at
once. Trips and clears are shared by the fleet through the database
(dispatch/protection/guard_sync.py); the counting is each dispatcher's own.

**No deactivation on the spot.** A configuration-shaped failure while the guard is clear
gives its delivery back (no attempt used) for one window and records a
``deactivation_pending`` event. When the delivery fails that way again after a whole window
in which this guard neither tripped nor cleared, the token is deactivated. So a mass event
that trips within a window of a failure deactivates nothing, and a dead token is
deactivated a window late, after one more provider call (dispatch/protection/guard_outcomes.py).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field

from tidings.clock import utcnow
from tidings.providers.base import ProviderError
from tidings.states import Effect, FailureKind
from tidings.store.deactivation_guard import GuardRecord

log = logging.getLogger(__name__)

# Deactivation reasons that a wrong environment, topic or project gives every token.
CONFIGURATION_SHAPED = frozenset({"BadDeviceToken", "DeviceTokenNotForTopic", "INVALID_ARGUMENT"})
HELD = "deactivation_guard"  # the deferral reason of a send the guard holds
PROBE_DEFER = 1.0  # seconds a send waits while the probes are out (also the least hold)
PROBE_TIMEOUT = 60.0  # a probe nobody reports on (its send was dropped) is given up
_LONG_AGO = datetime.min.replace(tzinfo=UTC)


class DeactivationGuardSettings(BaseModel):
    enabled: bool = True
    share: float = Field(default=0.2, gt=0, lt=1)
    min_samples: int = Field(default=20, ge=2, le=100_000)
    window_seconds: int = Field(default=60, ge=1, le=3600)
    hold_seconds: float = Field(default=300.0, gt=0, le=86_400)
    probes: int = Field(default=3, ge=1, le=100)


def configuration_shaped(effect: Effect | None, reason: str | None) -> bool:
    return effect is Effect.DEACTIVATE_DEVICE and reason in CONFIGURATION_SHAPED


def trips(sends: int, deactivations: int, settings: DeactivationGuardSettings) -> bool:
    """The rule: enough sends to judge, and more than the share of them would deactivate."""
    return sends >= settings.min_samples and deactivations > settings.share * sends


class Window:
    """Sends and would-be deactivations in the current whole second and the ``seconds - 1``
    before it, with running totals (one count per send)."""

    def __init__(self, seconds: int) -> None:
        self.seconds = seconds
        self._buckets: deque[list[int]] = deque()  # [second, sends, deactivations]
        self.sends = 0
        self.deactivations = 0

    def count(self, now: float, deactivating: bool) -> None:
        second = int(now // 1)
        self._trim(second)
        if self._buckets and self._buckets[-1][0] == second:
            entry = self._buckets[-1]
        else:
            entry = [second, 0, 0]
            self._buckets.append(entry)
        entry[1] += 1
        entry[2] += int(deactivating)
        self.sends += 1
        self.deactivations += int(deactivating)

    def totals(self, now: float) -> tuple[int, int]:
        self._trim(int(now // 1))
        return self.sends, self.deactivations

    def clear(self) -> None:
        self._buckets.clear()
        self.sends = self.deactivations = 0

    def _trim(self, second: int) -> None:
        while self._buckets and self._buckets[0][0] <= second - self.seconds:
            _, sends, deactivations = self._buckets.popleft()
            self.sends -= sends
            self.deactivations -= deactivations


class GuardStatus(StrEnum):
    CLEAR = "clear"
    HELD = "held"
    PROBING = "probing"


@dataclass(frozen=True)
class Trip:
    """A trip, as the fleet records it (times are wall-clock)."""

    account: str
    at: datetime
    hold_until: datetime
    share: float
    samples: int
    reason: str


@dataclass(frozen=True)
class Cleared:
    account: str
    at: datetime
    by: str


@dataclass
class _Account:
    window: Window
    clear_since: datetime  # a deactivation pending since before this waits again
    changed_at: datetime = _LONG_AGO  # the newest trip or clear applied here
    status: GuardStatus = GuardStatus.CLEAR
    trip: Trip | None = None
    hold_until: float = 0.0  # the clock's
    probes_out: deque[float] = field(default_factory=deque)
    probes_clean: int = 0


class DeactivationGuard:
    def __init__(
        self,
        settings: DeactivationGuardSettings | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], datetime] = utcnow,
    ) -> None:
        self.settings = settings or DeactivationGuardSettings()
        self._clock = clock
        self._wall = wall
        self._started = wall()  # nothing seen before: pending deactivations wait again
        self._accounts: dict[str, _Account] = {}
        self._changes: list[Trip | Cleared] = []

    @property
    def enabled(self) -> bool:
        return self.settings.enabled

    def _get(self, account: str) -> _Account:
        state = self._accounts.get(account)
        if state is None:
            window = Window(self.settings.window_seconds)
            state = self._accounts[account] = _Account(window, clear_since=self._started)
        return state

    def status(self, account: str) -> GuardStatus:
        state = self._accounts.get(account)
        if state is None:
            return GuardStatus.CLEAR
        self._advance(state, self._clock())
        return state.status

    def record(self, account: str, error: BaseException | None) -> None:
        """What a call to ``account`` came to (None: sent)."""
        if not self.enabled:
            return
        deactivating = isinstance(error, ProviderError) and configuration_shaped(
            error.effect, error.reason
        )
        state = self._get(account)
        now = self._clock()
        self._advance(state, now)
        if state.status is GuardStatus.PROBING:
            self._probed(account, state, error, deactivating)
            return
        state.window.count(now, deactivating)
        if state.status is GuardStatus.CLEAR and deactivating:
            sends, bad = state.window.totals(now)
            if trips(sends, bad, self.settings):
                assert isinstance(error, ProviderError)
                self._trip(account, state, bad / sends, sends, error.reason or "")

    def _probed(
        self, account: str, state: _Account, error: BaseException | None, deactivating: bool
    ) -> None:
        if state.probes_out:
            state.probes_out.popleft()
        if deactivating:
            assert isinstance(error, ProviderError)
            last = state.trip  # the evidence stays the first trip's
            share, samples = (last.share, last.samples) if last else (1.0, 1)
            self._trip(account, state, share, samples, error.reason or "", again=True)
            return
        if isinstance(error, ProviderError) and error.kind is FailureKind.TRANSIENT:
            return  # proves nothing either way
        if isinstance(error, Exception) and not isinstance(error, ProviderError):
            return
        state.probes_clean += 1
        if state.probes_clean >= self.settings.probes:
            at = self._wall()
            self._clear(state, at)
            self._changes.append(Cleared(account, at, "probes"))
            log.warning(
                "deactivation guard cleared for %s: %d probe sends had no configuration-shaped "
                "failure; its push flows again",
                account,
                self.settings.probes,
            )

    def _trip(
        self,
        account: str,
        state: _Account,
        share: float,
        samples: int,
        reason: str,
        again: bool = False,
    ) -> None:
        hold = self.settings.hold_seconds
        at = self._wall()
        trip = Trip(account, at, at + timedelta(seconds=hold), share, samples, reason)
        self._hold(state, trip, hold)
        self._changes.append(trip)
        if again:
            log.warning(
                "deactivation guard tripped again for %s: a probe send would deactivate a "
                "token (%s); holding its push for %gs more",
                account,
                reason,
                hold,
            )
            return
        log.warning(
            "deactivation guard tripped for %s: %.0f%% of %d sends would deactivate a token "
            "(%s), more than %.0f%%; holding its push for %gs, deactivating no token",
            account,
            100 * share,
            samples,
            reason,
            100 * self.settings.share,
            hold,
        )

    def _hold(self, state: _Account, trip: Trip, seconds: float) -> None:
        state.status = GuardStatus.HELD
        state.trip = trip
        state.hold_until = self._clock() + seconds
        state.changed_at = trip.at
        state.probes_out.clear()
        state.probes_clean = 0
        state.window.clear()

    def _clear(self, state: _Account, at: datetime) -> None:
        state.status = GuardStatus.CLEAR
        state.trip = None
        state.changed_at = at
        state.clear_since = max(at, self._wall())
        state.probes_out.clear()
        state.probes_clean = 0
        state.window.clear()

    def _advance(self, state: _Account, now: float) -> None:
        if state.status is GuardStatus.HELD and now >= state.hold_until:
            state.status = GuardStatus.PROBING
            state.probes_out.clear()
            state.probes_clean = 0

    def admit(self, account: str) -> float:
        """Seconds a send to ``account`` must wait; 0: send it (while probing, a probe is
        reserved: its report frees it, or ``cancel``)."""
        state = self._accounts.get(account)
        if state is None or state.status is GuardStatus.CLEAR:
            return 0.0
        now = self._clock()
        self._advance(state, now)
        if state.status is GuardStatus.HELD:
            return max(state.hold_until - now, PROBE_DEFER)
        while state.probes_out and now - state.probes_out[0] >= PROBE_TIMEOUT:
            state.probes_out.popleft()
        if len(state.probes_out) + state.probes_clean < self.settings.probes:
            state.probes_out.append(now)
            return 0.0
        return PROBE_DEFER

    def cancel(self, account: str) -> None:
        """A probe ``admit`` reserved is not going out after all."""
        state = self._accounts.get(account)
        if state is not None and state.status is GuardStatus.PROBING and state.probes_out:
            state.probes_out.pop()

    def holding(self, account: str) -> float | None:
        """Seconds a configuration-shaped failure's delivery is held; None: the guard is
        clear, and the deactivation waits for its verdict instead."""
        state = self._accounts.get(account)
        if state is None:
            return None
        self._advance(state, self._clock())
        if state.status is GuardStatus.HELD:
            return max(state.hold_until - self._clock(), PROBE_DEFER)
        return None if state.status is GuardStatus.CLEAR else PROBE_DEFER

    def confirm_since(self, account: str) -> datetime:
        """Waits for a verdict that began before this do not count."""
        return self._get(account).clear_since

    def confirm_in(self, since: datetime | None) -> float:
        """Seconds until a deactivation waiting since ``since`` may be made (0: now)."""
        window = float(self.settings.window_seconds)
        if since is None:
            return window
        return max(0.0, window - (self._wall() - since).total_seconds())

    def follow(self, record: GuardRecord) -> None:
        """The fleet's row for an account: apply its trip or clear when newer than ours."""
        changed = record.changed_at
        state = self._get(record.account)
        if changed is None or changed <= state.changed_at:
            return
        if record.tripped and record.tripped_at is not None:
            until = record.hold_until or record.tripped_at
            trip = Trip(
                record.account,
                record.tripped_at,
                until,
                record.share or 0.0,
                record.samples or 0,
                record.reason or "",
            )
            self._hold(state, trip, (until - self._wall()).total_seconds())
            log.info("deactivation guard of %s tripped by %s", record.account, record.tripped_by)
            return
        was = state.status
        self._clear(state, changed)
        if was is not GuardStatus.CLEAR:
            log.info("deactivation guard of %s cleared by %s", record.account, record.cleared_by)

    def changes(self) -> list[Trip | Cleared]:
        """This process's trips and clears since the last call, for the fleet."""
        found, self._changes = self._changes, []
        return found

    def snapshot(self, accounts: Iterable[str] = ()) -> dict[str, dict[str, Any]]:
        """The guard of each account seen so far, and of ``accounts``, as this process sees
        it, JSON-ready."""
        now = self._clock()
        out: dict[str, dict[str, Any]] = {}
        for account in sorted({*self._accounts, *accounts}):
            state = self._get(account)
            self._advance(state, now)
            sends, bad = state.window.totals(now)
            trip = state.trip
            held = state.status is GuardStatus.HELD
            out[account] = {
                "state": state.status.value,
                "windowSends": sends,
                "windowDeactivations": bad,
                "trippedAt": trip.at.isoformat() if trip else None,
                "share": trip.share if trip else None,
                "reason": trip.reason if trip else None,
                "holdInSeconds": max(0.0, state.hold_until - now) if held else None,
            }
        return out
