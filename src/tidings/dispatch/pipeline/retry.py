"""The retry policy: exponential backoff with full jitter, a cap and a maximum of attempts."""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pydantic import BaseModel, Field

from tidings.states import FailureKind

# A Retry-After beyond this is treated as this: a week is longer than any provider's outage
# worth waiting for, and datetimes overflow past year 9999.
MAX_RETRY_AFTER = 7 * 86400.0
# A stored policy's backoff beyond this (a year) saturates here, instead of overflowing.
MAX_BACKOFF = 366 * 86400.0


class RetrySettings(BaseModel):
    """Defaults of the retry policy; a notification type may override each."""

    base_delay: float = Field(default=2.0, gt=0)
    max_delay: float = Field(default=300.0, gt=0)
    max_attempts: int = Field(default=6, ge=1, le=100)


@dataclass(frozen=True)
class RetryPolicy:
    base_delay: float = 2.0
    max_delay: float = 300.0
    max_attempts: int = 6

    def with_overrides(self, overrides: Mapping[str, Any] | None) -> RetryPolicy:
        """This policy with a type's overrides (camelCase keys as the API takes them)."""
        if not overrides:
            return self
        return RetryPolicy(
            base_delay=float(overrides.get("baseDelay", self.base_delay)),
            max_delay=float(overrides.get("maxDelay", self.max_delay)),
            max_attempts=int(overrides.get("maxAttempts", self.max_attempts)),
        )

    def backoff(self, attempt: int, rng: random.Random) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based): full jitter."""
        ceiling = min(self.max_delay, self.base_delay * 2 ** min(attempt - 1, 62))
        return rng.uniform(0, ceiling)

    def decide(
        self,
        attempts: int,
        kind: FailureKind,
        now: datetime,
        rng: random.Random,
        retry_after: float | None = None,
    ) -> RetryDecision:
        """What to do after attempt number ``attempts`` failed with ``kind``."""
        if kind is not FailureKind.TRANSIENT:
            return RetryDecision(retry_at=None, failure_kind=kind)
        if attempts >= self.max_attempts:
            return RetryDecision(retry_at=None, failure_kind=FailureKind.EXHAUSTED)
        # The provider knows its own recovery time better than our backoff does.
        if retry_after is not None and not math.isnan(retry_after):
            delay = min(max(0.0, retry_after), MAX_RETRY_AFTER)
        else:
            delay = min(self.backoff(attempts, rng), MAX_BACKOFF)
        return RetryDecision(retry_at=now + timedelta(seconds=delay), failure_kind=None)


@dataclass(frozen=True)
class RetryDecision:
    """Either ``retry_at`` is set (back to PENDING) or ``failure_kind`` is (FAILED)."""

    retry_at: datetime | None
    failure_kind: FailureKind | None
