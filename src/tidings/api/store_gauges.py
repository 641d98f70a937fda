"""The gauges /metrics reads from the database, computed by the API process that is
scraped (docs/operations.md, Metrics): lane queues, dead letters, breaker states and
running campaigns. They describe the whole service, whichever process serves them, so
they are not per-process values to add up: no multiprocess gauge mode applies.

Read at most every ``metrics_refresh_seconds`` (one read shared by concurrent scrapes),
each from an index (services/gauges.py); a failed read keeps the last values, whose age
``tidings_metrics_store_age_seconds`` shows.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from tidings.clock import utcnow
from tidings.priorities import Priority
from tidings.service import Service
from tidings.services.gauges import LaneQueue, RunningCampaign, Snapshot, read_snapshot
from tidings.singleflight import SingleFlight

log = logging.getLogger(__name__)


@dataclass
class StoreGauges(Collector):
    service: Service
    refresh_seconds: float
    snapshot: Snapshot | None = None
    _read_at: float = field(default=float("-inf"))
    _flight: SingleFlight = field(init=False)

    def __post_init__(self) -> None:
        self._flight = SingleFlight(self._read)

    async def refresh(self) -> None:
        """Read again when the last read is older than ``refresh_seconds``."""
        if time.monotonic() - self._read_at >= self.refresh_seconds:
            await self._flight()

    async def _read(self) -> None:
        try:
            self.snapshot = await read_snapshot(self.service.db)
        except Exception as error:
            # The engine keeps statement parameters out of the error's text.
            log.warning("reading the metrics' gauges failed: %s", type(error).__name__)
        self._read_at = time.monotonic()  # a failed read is not retried at every scrape

    def collect(self) -> Iterator[Metric]:
        if self.snapshot is None:
            return
        yield from _queue_families(self.snapshot)
        yield from _other_families(self.snapshot)


def _queue_families(snapshot: Snapshot) -> Iterator[Metric]:
    depth = GaugeMetricFamily(
        "tidings_queue_depth",
        "Deliveries waiting per lane (priority): due now, scheduled for later, or queued "
        "(published to Kafka).",
        labels=["priority", "state"],
    )
    oldest = GaugeMetricFamily(
        "tidings_queue_oldest_due_age_seconds",
        "How long the longest-waiting due delivery of each lane has been due (0: none).",
        labels=["priority"],
    )
    for priority in Priority:
        lane = snapshot.queues.get(priority.value, LaneQueue())
        depth.add_metric([priority.value, "due"], lane.due)
        depth.add_metric([priority.value, "scheduled"], lane.scheduled)
        depth.add_metric([priority.value, "queued"], lane.queued)
        age = (snapshot.at - lane.oldest_due).total_seconds() if lane.oldest_due else 0.0
        oldest.add_metric([priority.value], max(0.0, age))
    yield depth
    yield oldest


def _other_families(snapshot: Snapshot) -> Iterator[Metric]:
    dead = GaugeMetricFamily(
        "tidings_dead_letters",
        "Deliveries in the dead-letter queue (FAILED: exhausted, poison, ambiguous).",
        labels=["kind"],
    )
    for kind, count in snapshot.dead_letters.items():
        dead.add_metric([kind], count)
    breaker = GaugeMetricFamily(
        "tidings_breaker_state",
        "Circuit breaker per account: 0 closed, 1 half-open, 2 open (the worst any live "
        "dispatcher reports).",
        labels=["account"],
    )
    for account, code in sorted(snapshot.breakers.items()):
        breaker.add_metric([account], code)
    age = GaugeMetricFamily(
        "tidings_metrics_store_age_seconds",
        "Seconds since the gauges read from the database were read.",
        value=(utcnow() - snapshot.at).total_seconds(),
    )
    yield from (dead, breaker, age)
    yield from _campaign_families(snapshot.campaigns)


def _campaign_families(campaigns: list[RunningCampaign]) -> Iterator[Metric]:
    # The id, not the name: a name is free text a namespace chose.
    labels = ["campaign", "status"]
    audience = GaugeMetricFamily(
        "tidings_campaign_audience_size",
        "Users in a running campaign's audience (-1 while it is being counted).",
        labels=labels,
    )
    expanded = GaugeMetricFamily(
        "tidings_campaign_expanded_users",
        "Users of a running campaign expanded into notifications so far.",
        labels=labels,
    )
    deliveries = GaugeMetricFamily(
        "tidings_campaign_deliveries",
        "Deliveries a running campaign has created so far.",
        labels=labels,
    )
    for running in campaigns:
        values = [str(running.id), running.status]
        size = running.audience_size
        audience.add_metric(values, -1 if size is None else size)
        expanded.add_metric(values, running.expanded)
        deliveries.add_metric(values, running.deliveries)
    yield from (audience, expanded, deliveries)
