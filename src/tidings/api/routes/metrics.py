"""GET /metrics: Prometheus' text format (docs/operations.md, Metrics).

With a metrics directory (``metrics_dir`` or ``PROMETHEUS_MULTIPROC_DIR``), the counters
and histograms of every process that writes there, added up; without, this process's
own. Either way with the gauges read from the database (api/store_gauges.py)."""

from __future__ import annotations

from collections.abc import Iterator

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.core import Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from tidings import metrics
from tidings.api.auth import Scope, needs
from tidings.api.deps import service_of
from tidings.api.store_gauges import StoreGauges

# Every namespace's counts (type names, campaign ids): a key with the metrics scope, as
# Prometheus sends it (docs/operations.md, Metrics); anyone while the service has no keys,
# which it then serves on loopback only.
router = APIRouter(tags=["metrics"], dependencies=needs(Scope.METRICS))


class _Scrape(Collector):
    """What one scrape exposes: the processes' metrics, then the database's gauges."""

    def __init__(self, gauges: StoreGauges) -> None:
        self.gauges = gauges

    def collect(self) -> Iterator[Metric]:
        directory = metrics.multiprocess_dir()
        if directory is None:
            yield from metrics.REGISTRY.collect()
        else:
            # Reads every process's files at each scrape; the library has no type hints.
            files = MultiProcessCollector(None, str(directory))  # type: ignore[no-untyped-call]
            yield from files.collect()  # type: ignore[no-untyped-call]
        yield from self.gauges.collect()


@router.get("/metrics", include_in_schema=False)
async def scrape(request: Request) -> Response:
    """Every metric, in Prometheus' text exposition format."""
    gauges = _gauges(request)
    await gauges.refresh()
    return Response(generate_latest(_Scrape(gauges)), media_type=CONTENT_TYPE_LATEST)


def _gauges(request: Request) -> StoreGauges:
    """The app's one cache of the database gauges, made at its first scrape."""
    state = request.app.state
    found: StoreGauges | None = getattr(state, "store_gauges", None)
    if found is None:
        service = service_of(request)
        found = StoreGauges(service, service.settings.metrics_refresh_seconds)
        state.store_gauges = found
    return found
