"""Whether Redis answers, as the dispatcher's shared parts see it: up, or down since when
and why. A change is logged loudly once; while down, Redis is tried again every
``RETRY_SECONDS`` (not on every call, which would wait out a timeout each time)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

RETRY_SECONDS = 1.0


@dataclass
class RedisHealth:
    clock: Callable[[], float] = time.monotonic
    up: bool = True
    down_since: float | None = None
    last_error: str | None = None
    _next_try: float = 0.0
    _wall_since: float | None = field(default=None, repr=False)

    def should_try(self) -> bool:
        return self.up or self.clock() >= self._next_try

    def failed(self, error: BaseException) -> None:
        self._next_try = self.clock() + RETRY_SECONDS
        self.last_error = type(error).__name__
        if self.up:
            self.up = False
            self.down_since = self.clock()
            self._wall_since = time.time()
            log.error(
                "Redis is unreachable (%s): rate limits fall back to this process's share "
                "of each account's rate, deduplication to the database claim alone; "
                "retrying every %.0f s",
                self.last_error,
                RETRY_SECONDS,
            )

    def succeeded(self) -> None:
        if not self.up:
            down_for = self.clock() - (self.down_since or self.clock())
            log.warning("Redis is reachable again after %.1f s: shared limits resume", down_for)
            self.up, self.down_since, self._wall_since = True, None, None

    def snapshot(self) -> dict[str, Any]:
        """For /readyz and GET /v1/providers (through provider_state)."""
        return {"up": self.up, "downSince": self._wall_since, "lastError": self.last_error}
