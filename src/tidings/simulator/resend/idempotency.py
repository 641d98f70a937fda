"""Resend's idempotency keys, as its documentation ("Idempotency Keys") and error list
describe them, on ``POST /emails``:

- a key is 1 to 256 characters (else 400 ``invalid_idempotency_key``);
- a key seen in the last 24 hours with the same body is answered as the first request was
  (the same email ``id``), and no email is sent again;
- the same key with a different body is 409 ``invalid_idempotent_request``;
- the same key while its first request is still being processed is 409
  ``concurrent_idempotent_requests``;
- after 24 hours the key is forgotten: the same request sends again.

Only an accepted request keeps its key here (a refused one may be sent again with it):
Resend's documentation speaks only of emails sent; this is the stricter reading for the
sender, never a kinder one.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

WINDOW_SECONDS = 24 * 3600.0
MAX_KEY = 256


@dataclass
class _Entry:
    fingerprint: str
    expires: float
    answer: dict[str, Any] | None = None  # None: in progress


Decision = Literal["new", "replay", "conflict", "in_progress"]


@dataclass
class IdempotencyKeys:
    clock: Callable[[], float] = time.monotonic
    window: float = WINDOW_SECONDS
    _entries: dict[str, _Entry] = field(default_factory=dict)

    @staticmethod
    def valid(key: str) -> bool:
        return 1 <= len(key) <= MAX_KEY

    def begin(self, key: str, body: Any) -> tuple[Decision, dict[str, Any] | None]:
        """What a request with ``key`` and ``body`` gets; "new" reserves the key."""
        now = self.clock()
        entry = self._entries.get(key)
        if entry is not None and entry.expires <= now:
            del self._entries[key]
            entry = None
        fingerprint = _fingerprint(body)
        if entry is None:
            self._entries[key] = _Entry(fingerprint, now + self.window)
            return "new", None
        if entry.answer is None:
            return "in_progress", None
        if entry.fingerprint != fingerprint:
            return "conflict", None
        return "replay", entry.answer

    def done(self, key: str, answer: dict[str, Any]) -> None:
        """The reserved request was accepted: replay ``answer`` for the window."""
        entry = self._entries.get(key)
        if entry is not None:
            entry.answer = answer

    def release(self, key: str) -> None:
        """The reserved request was refused: the key is free again."""
        entry = self._entries.get(key)
        if entry is not None and entry.answer is None:
            del self._entries[key]

    def clear(self) -> None:
        self._entries.clear()


def _fingerprint(body: Any) -> str:
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()
