"""How long each account kept a lane without a rate token, told to the metrics
(``tidings_rate_limit_wait_seconds``); in memory only, nothing awaited."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from tidings import metrics
from tidings.priorities import Priority


@dataclass
class TokenWaits:
    """Per account and priority, since when a lane has found no rate token: each spell is
    observed once a token is found again (``tidings_rate_limit_wait_seconds``)."""

    _since: dict[tuple[str, Priority], float] = field(default_factory=dict)

    def saw(self, tokens: Mapping[str, int | None], priority: Priority) -> None:
        now = time.monotonic()
        for account, available in tokens.items():
            key = (account, priority)
            if available == 0:
                self._since.setdefault(key, now)
            elif key in self._since:
                metrics.rate_limit_wait(account, priority, now - self._since.pop(key))
