"""What every tidings process counts, defined in one place (docs/operations.md, Metrics).

Base vocabulary: it imports nothing of tidings, so any layer may record. Callers pass
plain strings from bounded sets (registered type names, channels, priorities, account
names, reasons and failure kinds), never addresses or ids, so that label sets stay small.

The gauges read from the database (queues, dead letters, breakers, campaigns) are not
here: the API process that serves ``/metrics`` computes them at scrape time
(api/store_gauges.py). Recording one value is a dictionary lookup and an addition (a
write to a memory-mapped file in multiprocess mode): cheap enough for every delivery.
"""

from __future__ import annotations

import atexit
import os
import socket
from pathlib import Path
from typing import Generic, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, multiprocess, values
from prometheus_client import disable_created_metrics as _disable_created

# Each process's own registry (single-process mode); with a metrics directory, /metrics
# reads every process's files instead (``multiprocess_dir``).
REGISTRY = CollectorRegistry(auto_describe=True)
# No ``*_created`` series: the multiprocess collector has none, so both modes look alike.
_disable_created()  # type: ignore[no-untyped-call]

_LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600)
_CALL_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
_WAIT_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)

_DELIVERY = ("type", "channel", "priority")

NOTIFICATIONS_ACCEPTED = Counter(
    "tidings_notifications_accepted",
    "Notifications accepted by the API (idempotent replays not counted).",
    ("type", "priority"),
    registry=REGISTRY,
)
ACCEPTED = Counter(
    "tidings_deliveries_accepted",
    "Deliveries accepted by the API, those skipped at accept included.",
    _DELIVERY,
    registry=REGISTRY,
)
SENT = Counter(
    "tidings_deliveries_sent",
    "Deliveries a provider accepted.",
    (*_DELIVERY, "provider"),
    registry=REGISTRY,
)
FAILED = Counter(
    "tidings_deliveries_failed",
    "Deliveries that ended FAILED, by failure kind.",
    (*_DELIVERY, "provider", "kind"),
    registry=REGISTRY,
)
SKIPPED = Counter(
    "tidings_deliveries_skipped",
    "Deliveries that ended SKIPPED (at accept or at send time), by reason.",
    (*_DELIVERY, "reason"),
    registry=REGISTRY,
)
EXPIRED = Counter(
    "tidings_deliveries_expired", "Deliveries whose TTL ran out.", _DELIVERY, registry=REGISTRY
)
CANCELLED = Counter(
    "tidings_deliveries_cancelled",
    "Claimed deliveries of a cancelled campaign, dropped before the provider call.",
    _DELIVERY,
    registry=REGISTRY,
)
DEFERRED = Counter(
    "tidings_deliveries_deferred",
    "Claimed deliveries put back for later without using an attempt, by reason.",
    ("channel", "priority", "reason"),
    registry=REGISTRY,
)
LATENCY = Histogram(
    "tidings_delivery_latency_seconds",
    "From when a delivery was due (accepted, or its sendAt) to its provider's acceptance.",
    ("priority",),
    buckets=_LATENCY_BUCKETS,
    registry=REGISTRY,
)
PROVIDER_CALLS = Counter(
    "tidings_provider_calls",
    "Provider calls by result: ok, a failure kind, timeout or error.",
    ("provider", "channel", "result"),
    registry=REGISTRY,
)
PROVIDER_SECONDS = Histogram(
    "tidings_provider_call_seconds",
    "How long provider calls took, failed ones included.",
    ("provider", "channel"),
    buckets=_CALL_BUCKETS,
    registry=REGISTRY,
)
RATE_LIMIT_WAIT = Histogram(
    "tidings_rate_limit_wait_seconds",
    "Spells a lane found an account without a rate token, and how long each lasted.",
    ("account", "priority"),
    buckets=_WAIT_BUCKETS,
    registry=REGISTRY,
)

LANE_PROGRESS = Counter(
    "tidings_lane_progress",
    "What each lane did: tickets read, deliveries claimed, tokens asked, outcomes, sends, "
    "restarts after a stall.",
    ("transport", "priority", "kind"),
    registry=REGISTRY,
)
LANE_LAST_SUCCESS = Gauge(
    "tidings_lane_last_success_timestamp_seconds",
    "When a lane's last send succeeded (Unix time).",
    ("transport", "priority"),
    multiprocess_mode="max",
    registry=REGISTRY,
)
LANE_STALLED = Gauge(
    "tidings_lane_stalled",
    "1 while a lane with due work has moved nothing for its stall_seconds.",
    ("transport", "priority"),
    multiprocess_mode="livemax",
    registry=REGISTRY,
)

RENDER_CACHE = Counter(
    "tidings_render_cache",
    "Renders of templates that run in the worker thread: reused (hit) or made and kept (miss).",
    ("result",),
    registry=REGISTRY,
)

_directory: Path | None = None
M = TypeVar("M", Counter, Gauge, Histogram)


def configure(directory: Path | None) -> Path | None:
    """Turn multiprocess mode on when ``directory`` (the ``metrics_dir`` setting) or
    ``PROMETHEUS_MULTIPROC_DIR`` names a directory: the directory used, else None.

    Call it before anything is recorded (``runner.run`` does, first): prometheus_client
    picks how values are stored when a labelled metric's child is made."""
    global _directory
    found = directory or os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if not found:
        return None
    path = Path(found).resolve()
    if _directory == path:
        return path
    path.mkdir(parents=True, exist_ok=True)
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(path)
    # Host and pid: processes of several containers sharing one volume may have one pid
    # (file names split on "_").
    host = socket.gethostname().replace("_", "-")

    def identity() -> str:
        return f"{host}-{os.getpid()}"

    values.ValueClass = values.MultiProcessValue(identity)  # type: ignore[no-untyped-call]
    atexit.register(multiprocess.mark_process_dead, identity(), str(path))
    _directory = path
    return path


def multiprocess_dir() -> Path | None:
    """The directory every process writes to, when multiprocess mode is on."""
    return _directory


class _Children(Generic[M]):
    """A metric's labelled children by their label values: ``labels()`` checks and locks
    at every call, this is one dictionary lookup once a label set has been seen."""

    def __init__(self, metric: M) -> None:
        self.metric: M = metric
        self._found: dict[tuple[str, ...], M] = {}

    def __call__(self, *labels: str) -> M:
        found = self._found.get(labels)
        if found is None:
            found = self._found[labels] = self.metric.labels(*labels)
        return found


_notifications_accepted = _Children(NOTIFICATIONS_ACCEPTED)
_accepted = _Children(ACCEPTED)
_sent = _Children(SENT)
_failed = _Children(FAILED)
_skipped = _Children(SKIPPED)
_expired = _Children(EXPIRED)
_cancelled = _Children(CANCELLED)
_deferred = _Children(DEFERRED)
_latency = _Children(LATENCY)
_provider_calls = _Children(PROVIDER_CALLS)
_provider_seconds = _Children(PROVIDER_SECONDS)
_rate_limit_wait = _Children(RATE_LIMIT_WAIT)
_lane_progress = _Children(LANE_PROGRESS)
_lane_last_success = _Children(LANE_LAST_SUCCESS)


def accepted(type_name: str, priority: str, channels: list[tuple[str, str | None]]) -> None:
    """One accepted notification and its deliveries: (channel, skip reason or None)."""
    _notifications_accepted(type_name, priority).inc()
    for channel, skip_reason in channels:
        _accepted(type_name, channel, priority).inc()
        if skip_reason is not None:
            _skipped(type_name, channel, priority, skip_reason).inc()


def sent(type_name: str, channel: str, priority: str, provider: str, latency: float) -> None:
    _sent(type_name, channel, priority, provider).inc()
    _latency(priority).observe(max(0.0, latency))


def failed(type_name: str, channel: str, priority: str, provider: str, kind: str) -> None:
    _failed(type_name, channel, priority, provider, kind).inc()


def skipped(type_name: str, channel: str, priority: str, reason: str) -> None:
    _skipped(type_name, channel, priority, reason).inc()


def expired(type_name: str, channel: str, priority: str) -> None:
    _expired(type_name, channel, priority).inc()


def cancelled(type_name: str, channel: str, priority: str) -> None:
    _cancelled(type_name, channel, priority).inc()


def deferred(channel: str, priority: str, reason: str) -> None:
    _deferred(channel, priority, reason).inc()


def provider_call(provider: str, channel: str, result: str, seconds: float) -> None:
    _provider_calls(provider, channel, result).inc()
    _provider_seconds(provider, channel).observe(seconds)


def rate_limit_wait(account: str, priority: str, seconds: float) -> None:
    _rate_limit_wait(account, priority).observe(seconds)


def lane_progress(transport: str, priority: str, kind: str, count: int) -> None:
    _lane_progress(transport, priority, kind).inc(count)


def lane_success(transport: str, priority: str, at: float) -> None:
    _lane_last_success(transport, priority).set(at)


def lane_stalled(transport: str, priority: str, stalled: bool) -> None:
    LANE_STALLED.labels(transport, priority).set(1 if stalled else 0)
