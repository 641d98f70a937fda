"""How one simulated provider behaves (latency, errors, rate limit, outages) and what it saw.

Every simulated provider (SendGrid, Twilio, FCM, APNs, SMTP, webhooks) owns one
``ProviderState``. A request handler first asks ``admit`` what to answer, then, when the
answer is a success, calls ``record``; the provider module maps an admission to its own
wire format (an HTTP status and body, or an SMTP reply).
"""

from __future__ import annotations

import asyncio
import random
import re
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field

OK = "ok"
OUTAGE = "outage"
RATE_LIMITED = "rate_limited"


class Behaviour(BaseModel):
    """Configurable per provider (TOML, the control API, or from Python)."""

    # Each request waits latency_ms plus a uniform random 0..latency_jitter_ms.
    latency_ms: float = Field(default=0.0, ge=0)
    latency_jitter_ms: float = Field(default=0.0, ge=0)
    # Documented error name (for example "UNREGISTERED", "21211", "5.1.1") -> probability.
    errors: dict[str, float] = Field(default_factory=dict)
    # Requests per second, with a bucket of `burst` (default: one second's worth); above: 429.
    rate_limit: float | None = Field(default=None, gt=0)
    burst: float | None = Field(default=None, gt=0)
    # Outage windows in seconds since the simulator started: [[from, to], ...].
    outages: list[tuple[float, float]] = Field(default_factory=list)
    # Down until switched back on (control API); like an outage window without an end.
    down: bool = False
    # A repeated idempotency key is answered as the first request was, without a new send.
    # Off by default: no real SMTP server, SendGrid, Twilio, FCM or APNs dedupes by our key.
    dedup: bool = False
    # After accepting: what the provider reports back (SendGrid events, Twilio callbacks and
    # replies), outcome name -> probability; the rest is "delivered". SendGrid: bounce,
    # blocked, spamreport; Twilio: "undelivered:<code>", "failed:<code>", stop.
    reports: dict[str, float] = Field(default_factory=dict)
    # Milliseconds from acceptance to the report.
    report_delay_ms: float = Field(default=50.0, ge=0, le=600_000)
    # Milliseconds between retries of a refused report; default: the provider's own wait
    # (SNS: 20 s, three retries). Tests shorten it; the number of retries stays the real one.
    report_retry_ms: float | None = Field(default=None, ge=0, le=600_000)
    # SMTP only: EHLO offers SMTPUTF8 (RFC 6531), as Postfix and Gmail do; off, a non-ASCII
    # address or header is refused (read at each EHLO).
    smtputf8: bool = True


@dataclass(frozen=True)
class ErrorNames:
    """The error names a provider answers as documented: its own list, and the forms that
    ``pattern`` (a regular expression, described by ``pattern_text``) matches. ``outage`` and
    ``rate_limited`` are everyone's."""

    names: frozenset[str]
    pattern: str | None = None
    pattern_text: str | None = None

    def unknown(self, names: Iterable[str]) -> list[str]:
        """Those of ``names`` this provider would not answer as the name says."""
        return [name for name in names if not self._known(name)]

    def _known(self, name: str) -> bool:
        if name in self.names or name in (OUTAGE, RATE_LIMITED):
            return True
        return self.pattern is not None and re.fullmatch(self.pattern, name) is not None

    def listing(self) -> dict[str, Any]:
        """The valid names, as the control API's 422 lists them."""
        listing: dict[str, Any] = {"valid": sorted(self.names | {OUTAGE, RATE_LIMITED})}
        if self.pattern_text:
            listing["alsoValid"] = self.pattern_text
        return listing


@dataclass
class Scripted:
    """The next ``times`` requests to ``address`` get ``error``."""

    error: str
    times: int


@dataclass
class Received:
    address: str
    idempotency_key: str | None
    payload: dict[str, Any]
    at: float
    duplicate: bool


@dataclass
class ProviderState:
    name: str
    behaviour: Behaviour = field(default_factory=Behaviour)
    started: float = field(default_factory=time.monotonic)
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    scripts: dict[str, list[Scripted]] = field(default_factory=dict)
    received: list[Received] = field(default_factory=list)
    answers: dict[str, Any] = field(default_factory=dict)  # idempotency key -> first answer
    reports: list[tuple[str, str]] = field(default_factory=list)  # (address, outcome) decided
    counts: Counter[str] = field(default_factory=Counter)
    # What ``errors`` and scripts may name; None: anything (a provider that lists none).
    error_names: ErrorNames | None = None
    _keys: set[str] = field(default_factory=set)
    _tokens: float | None = None
    _refilled: float = field(default_factory=time.monotonic)

    def script(self, address: str, error: str, times: int = 1) -> None:
        self.scripts.setdefault(address, []).append(Scripted(error, times))

    async def admit(self, address: str) -> str:
        """``ok``, ``outage``, ``rate_limited`` or the name of an error to answer with."""
        self.counts["requests"] += 1
        behaviour = self.behaviour
        if behaviour.latency_ms or behaviour.latency_jitter_ms:
            jitter = self.rng.uniform(0, behaviour.latency_jitter_ms)
            await asyncio.sleep((behaviour.latency_ms + jitter) / 1000)
        if self.in_outage():
            self.counts["outage"] += 1
            return OUTAGE
        if not self._take_token():
            self.counts["over_limit"] += 1
            return RATE_LIMITED
        error = self._scripted_error(address) or self._random_error()
        if error is not None:
            self.counts[f"error:{error}"] += 1
            return error
        return OK

    def in_outage(self) -> bool:
        if self.behaviour.down:
            return True
        elapsed = time.monotonic() - self.started
        return any(start <= elapsed < end for start, end in self.behaviour.outages)

    def record(self, address: str, idempotency_key: str | None, payload: dict[str, Any]) -> bool:
        """Keep one accepted message; True when its key (the delivery id it carries) was seen
        before: a second send of one delivery, counted whether or not ``dedup`` is on."""
        duplicate = idempotency_key is not None and idempotency_key in self._keys
        if idempotency_key is not None:
            self._keys.add(idempotency_key)
        self.received.append(Received(address, idempotency_key, payload, time.time(), duplicate))
        self.counts["received"] += 1
        if duplicate:
            self.counts["duplicates"] += 1
        return duplicate

    def summary(self) -> dict[str, Any]:
        return {
            "received": self.counts["received"],
            "distinct": self.counts["received"] - self.counts["duplicates"],
            "duplicates": self.counts["duplicates"],
            "requests": self.counts["requests"],
            "overLimit": self.counts["over_limit"],
            "outageRejected": self.counts["outage"],
            "reportsPosted": self.counts["reports_posted"],
            "reportsFailed": self.counts["reports_failed"],
            "errors": {
                name.removeprefix("error:"): n
                for name, n in self.counts.items()
                if name.startswith("error:")
            },
        }

    def first_answer(self, key: str | None) -> Any:
        """With ``dedup`` on, the answer a repeated key gets again; else None."""
        return self.answers.get(key) if key is not None and self.behaviour.dedup else None

    def reset(self) -> None:
        self.scripts.clear()
        self.received.clear()
        self.answers.clear()
        self.reports.clear()
        self.counts.clear()
        self._keys.clear()
        self._tokens = None

    def _scripted_error(self, address: str) -> str | None:
        queue = self.scripts.get(address)
        if not queue:
            return None
        head = queue[0]
        head.times -= 1
        if head.times <= 0:
            queue.pop(0)
        return head.error

    def report_outcome(self, address: str) -> str:
        """What becomes of an accepted message: one of ``reports`` or "delivered"."""
        outcome = _pick(self.rng.random(), self.behaviour.reports) or "delivered"
        self.reports.append((address, outcome))
        return outcome

    def _random_error(self) -> str | None:
        return _pick(self.rng.random(), self.behaviour.errors)

    def _take_token(self) -> bool:
        rate = self.behaviour.rate_limit
        if rate is None:
            return True
        capacity = self.behaviour.burst or rate
        now = time.monotonic()
        tokens = capacity if self._tokens is None else self._tokens
        tokens = min(capacity, tokens + (now - self._refilled) * rate)
        self._refilled = now
        if tokens < 1:
            self._tokens = tokens
            return False
        self._tokens = tokens - 1
        return True


def _pick(roll: float, probabilities: dict[str, float]) -> str | None:
    """The name whose share of [0, 1) ``roll`` falls in, or None past them all."""
    for name, probability in probabilities.items():
        if roll < probability:
            return name
        roll -= probability
    return None
