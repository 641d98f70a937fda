"""When a request is tried again, and after how long: one policy for both clients.

Retried: no answer (connection refused or lost, timeout), 5xx, and 429. Every route of the
API is safe to repeat: sends carry their Idempotency-Key (the same on every attempt), the
other writes are PUTs or repeatable (a cancel answers the same counts). Other 4xx are the
caller's to fix and are never retried.
"""

from __future__ import annotations

import email.utils
import random
from dataclasses import dataclass
from datetime import UTC, datetime

import httpx

# Errors that a new attempt cannot fix (a bad URL, a request httpx refuses to write).
_FINAL = (httpx.UnsupportedProtocol, httpx.LocalProtocolError, httpx.ProxyError)


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff with jitter: before retry *n* (from 0) the client waits a random
    time between half and all of ``min(cap, base * 2**n)`` seconds. A Retry-After of the
    server is waited instead, if it is at most ``max_retry_after``; a longer one ends the
    retries (the error carries it as ``retry_after``)."""

    base: float = 0.5
    cap: float = 10.0
    max_retry_after: float = 60.0

    def delay(self, retry: int, rng: random.Random) -> float:
        ceiling = min(self.cap, self.base * 2.0**retry)
        return rng.uniform(ceiling / 2, ceiling)


def retry_after(response: httpx.Response, now: datetime | None = None) -> float | None:
    """The answer's Retry-After in seconds (delta-seconds or an HTTP date), if it has one."""
    value = response.headers.get("Retry-After")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def retryable_status(status: int) -> bool:
    return status == 429 or status >= 500


class Attempts:
    """One request's retries: after each failed attempt, how long to wait, or None when
    the failure is final."""

    def __init__(self, retries: int, backoff: Backoff, rng: random.Random) -> None:
        self.retries = retries
        self.backoff = backoff
        self.rng = rng
        self.made = 0

    def after_error(self, error: httpx.TransportError) -> float | None:
        self.made += 1
        if isinstance(error, _FINAL) or self.made > self.retries:
            return None
        return self.backoff.delay(self.made - 1, self.rng)

    def after_answer(self, response: httpx.Response) -> float | None:
        self.made += 1
        if not retryable_status(response.status_code) or self.made > self.retries:
            return None
        asked = retry_after(response)
        if asked is None:
            return self.backoff.delay(self.made - 1, self.rng)
        return asked if asked <= self.backoff.max_retry_after else None
