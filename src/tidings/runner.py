"""Running tidings: the API, the dispatcher, or both in one process (the embedded mode);
with the Kafka transport, a relay and a worker (a dispatcher whose lanes consume topics).
A process that runs the API also runs the bounce listener when ``bounces`` is set."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
from collections.abc import Coroutine, Generator
from typing import Any

import uvicorn

from tidings.api.app import create_app
from tidings.dispatch.dispatcher import Dispatcher
from tidings.dispatch.kafka_lane import WorkerPlan
from tidings.dispatch.relay import Relay
from tidings.providers.chains import ProviderSet
from tidings.service import Service, providers_from_settings
from tidings.settings import Settings
from tidings.store.migrate import upgrade
from tidings.tracking.bounce_listener import BounceListener

log = logging.getLogger(__name__)


class _Server(uvicorn.Server):
    """uvicorn without its own signal handling: tidings stops API and dispatcher together."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


async def run(
    settings: Settings,
    *,
    api: bool,
    dispatch: bool,
    migrate: bool,
    relay: bool = False,
    worker: WorkerPlan | None = None,
) -> None:
    """Run until SIGTERM or SIGINT, then stop taking work and finish what is in flight.
    ``dispatch``: a direct dispatcher; ``relay`` and ``worker``: the Kafka transport's."""
    service = Service.from_settings(settings)
    sends = dispatch or worker is not None
    providers = providers_from_settings(settings) if sends else ProviderSet({}, {})
    stop = asyncio.Event()
    jobs: list[Coroutine[Any, Any, None]] = []
    server: _Server | None = None
    try:
        if migrate:
            await upgrade(service.db)
        if api:
            config = uvicorn.Config(
                create_app(service),
                host=settings.host,
                port=settings.port,
                lifespan="off",
                access_log=settings.access_log,
            )
            server = _Server(config)
            jobs.append(server.serve())
            if settings.bounces is not None:  # DSNs mailed to the SMTP accounts' return paths
                jobs.append(BounceListener(settings.bounces, service.db).run(stop))
        if dispatch:
            jobs.append(Dispatcher(service, providers).run(stop))
        if relay:
            jobs.append(Relay(service).run(stop))
        if worker is not None:
            jobs.append(Dispatcher(service, providers, worker=worker).run(stop))
        _on_signals(stop, server)
        # What start-up built lives as long as the process: out of the collector's sight,
        # full collections stay short (they paused every request for 100-200 ms).
        gc.collect()
        gc.freeze()
        await asyncio.gather(*jobs)
    finally:
        try:
            await providers.close()
        finally:
            await service.close()


def _on_signals(stop: asyncio.Event, server: uvicorn.Server | None) -> None:
    loop = asyncio.get_running_loop()

    def shut_down(name: str) -> None:
        log.info("%s received: finishing in-flight work", name)
        stop.set()
        if server is not None:
            server.should_exit = True

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, shut_down, sig.name)
