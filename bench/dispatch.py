"""Dispatch throughput: tidings' own Dispatcher, in this process, sending through the no-op
provider (or the given providers), timed from its start until every pre-inserted delivery
is SENT."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import asyncpg

from bench.api_server import _spawn, _stop, _tail
from bench.memory import peak_rss_mb
from tidings.assembly import assemble_dispatcher
from tidings.priorities import Channel
from tidings.providers.base import Provider
from tidings.providers.chains import ProviderSet
from tidings.providers.sink import NoopProvider
from tidings.service import Service
from tidings.settings import Settings

# Both use a partial index (status = 'PENDING' / 'SENDING'): cheap while the dispatcher runs.
_UNFINISHED = """
SELECT EXISTS (SELECT 1 FROM delivery WHERE status = 'PENDING')
    OR EXISTS (SELECT 1 FROM delivery WHERE status = 'SENDING')
"""


def dispatch_settings(database_url: str, claim_batch: int, concurrency: int) -> Settings:
    """The NORMAL lane sized for throughput; everything else at tidings' defaults."""
    normal = {"concurrency": concurrency, "claim_batch": claim_batch}
    return Settings(database_url=database_url, lanes={"normal": normal})


def noop_providers() -> dict[Channel, Provider]:
    provider: Provider = NoopProvider()
    return dict.fromkeys(Channel, provider)


async def run_dispatcher(
    service: Service,
    pool: asyncpg.Pool,
    providers: ProviderSet | None = None,
    poll: float = 0.02,
) -> float:
    """Seconds from starting a dispatcher until no delivery is PENDING or SENDING;
    ``providers``: the no-op provider on every channel unless given."""
    dispatcher = assemble_dispatcher(service, noop_providers() if providers is None else providers)
    stop = asyncio.Event()
    started = time.perf_counter()
    task = asyncio.create_task(dispatcher.run(stop))

    def alive() -> None:
        if task.done():
            task.result()  # raises what killed the dispatcher
            raise RuntimeError("the dispatcher stopped before finishing")

    try:
        await wait_finished(pool, alive, poll)
        return time.perf_counter() - started
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=60)


async def wait_finished(pool: asyncpg.Pool, alive: Callable[[], None], poll: float) -> None:
    """Until no delivery is PENDING or SENDING; ``alive`` raises when the dispatcher died."""
    async with pool.acquire() as conn:
        while await conn.fetchval(_UNFINISHED):
            alive()
            await asyncio.sleep(poll)


async def run_dispatch_process(
    database_url: str, env: dict[str, str], pool: asyncpg.Pool, log: Path
) -> tuple[float, float | None]:
    """``tidings dispatch`` as a subprocess until no delivery is PENDING or SENDING: seconds
    from its start (its start-up included) and its peak RSS in MB, read before it stops."""
    process = _spawn(["dispatch"], database_url, log, env)
    started = time.perf_counter()

    def alive() -> None:
        if process.poll() is not None:
            raise RuntimeError(f"tidings dispatch exited early:\n{_tail(log)}")

    try:
        await wait_finished(pool, alive, poll=0.05)
        return time.perf_counter() - started, peak_rss_mb(process.pid)
    finally:
        _stop(process)
