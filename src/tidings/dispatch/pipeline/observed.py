"""What the dispatcher tells the metrics (tidings/metrics.py): each outcome as it goes to
the writer and each provider call (how long each account kept a lane without a rate token:
dispatch/protection/token_waits.py).

In memory only: no database round trip, nothing awaited. An outcome is counted when the
pipeline decides it, before the batch is written; a write that its fence refuses (the
lease was lost and the delivery claimed again) has been counted all the same."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterator

from tidings import metrics
from tidings.dispatch.protection.breaker import THROTTLE_REASONS
from tidings.providers.base import ProviderError
from tidings.states import Status
from tidings.store.claims import ClaimedDelivery
from tidings.store.outcomes import Outcome

log = logging.getLogger(__name__)

# PENDING outcomes that are no deferral: a retry (counted as a provider call) and a delivery
# given back (shutdown, checks or platforms unreadable).
_NOT_DEFERRALS = (None, "retry_scheduled", "released")


def outcome(delivery: ClaimedDelivery, result: Outcome) -> None:
    """Count ``result`` of ``delivery`` by what it ends as (or why it waits); a metric's
    trouble is logged, never raised into the send."""
    try:
        _count(delivery, result)
    except Exception:
        log.exception("counting an outcome failed")


def _count(delivery: ClaimedDelivery, result: Outcome) -> None:
    kind, channel, priority = delivery.type, delivery.channel, delivery.priority
    status = result.status
    if status is Status.SENT:
        due = delivery.send_at or delivery.created_at
        latency = (result.sent_at - due).total_seconds() if result.sent_at else 0.0
        metrics.sent(kind, channel, priority, result.provider or "", latency)
    elif status is Status.FAILED:
        failure = result.failure_kind.value if result.failure_kind else ""
        metrics.failed(kind, channel, priority, result.provider or "", failure)
    elif status is Status.SKIPPED:
        metrics.skipped(kind, channel, priority, result.skip_reason or "")
    elif status is Status.EXPIRED:
        metrics.expired(kind, channel, priority)
    elif status is Status.CANCELLED:
        metrics.cancelled(kind, channel, priority)
    elif result.event not in _NOT_DEFERRALS:
        # "deferred" says why in its detail; the deactivation guard's events are their own.
        reason = (result.event_detail or {}).get("reason") if result.event == "deferred" else None
        metrics.deferred(channel, priority, str(reason or result.event))


@contextlib.contextmanager
def provider_call(provider: str, channel: str) -> Iterator[None]:
    """Time one provider call and count it by its result."""
    started = time.monotonic()
    result = "error"
    try:
        yield
        result = "ok"
    except ProviderError as error:
        throttled = error.reason in THROTTLE_REASONS
        result = "throttled" if throttled else error.kind.value
        raise
    except TimeoutError:
        result = "timeout"
        raise
    except asyncio.CancelledError:
        result = "cancelled"
        raise
    finally:
        metrics.provider_call(provider, channel, result, time.monotonic() - started)
