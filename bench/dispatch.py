"""Dispatch throughput: tidings' own Dispatcher, in this process, sending through the no-op
provider, timed from its start until every pre-inserted delivery is SENT."""

from __future__ import annotations

import asyncio
import time

import asyncpg

from tidings.dispatch.dispatcher import Dispatcher
from tidings.priorities import Channel
from tidings.providers.base import Provider
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


async def run_dispatcher(service: Service, pool: asyncpg.Pool, poll: float = 0.02) -> float:
    """Seconds from starting a dispatcher until no delivery is PENDING or SENDING."""
    provider: Provider = NoopProvider()
    dispatcher = Dispatcher(service, dict.fromkeys(Channel, provider))
    stop = asyncio.Event()
    started = time.perf_counter()
    task = asyncio.create_task(dispatcher.run(stop))
    try:
        async with pool.acquire() as conn:
            while await conn.fetchval(_UNFINISHED):
                if task.done():
                    task.result()  # raises what killed the dispatcher
                    raise RuntimeError("the dispatcher stopped before finishing")
                await asyncio.sleep(poll)
        return time.perf_counter() - started
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=60)
