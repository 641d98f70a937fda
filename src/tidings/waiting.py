"""Waiting for whichever comes first: work, a wake-up, or the order to stop."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable


async def first_of(*awaitables: Awaitable[object]) -> None:
    """Return when the first of ``awaitables`` is done; cancel the others."""
    tasks = [asyncio.ensure_future(awaitable) for awaitable in awaitables]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()


async def sleep_unless(stop: asyncio.Event, seconds: float) -> None:
    """Sleep ``seconds``, or less if ``stop`` is set meanwhile."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await stop.wait()
