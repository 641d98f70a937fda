"""Shared send deadlines (dispatch/pipeline/deadlines.py): asyncio.timeout's semantics, one timer
per slice of time."""

from __future__ import annotations

import asyncio
import time

import pytest

from tidings.dispatch.pipeline.deadlines import Deadlines


async def test_a_block_past_its_limit_raises_timeout_error_no_sooner_than_the_limit() -> None:
    deadlines = Deadlines(resolution=0.05)
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        async with deadlines.limit(0.2):
            await asyncio.sleep(5)
    took = time.monotonic() - started
    assert took >= 0.2
    assert took < 2  # late by a slice at most, plus a loaded machine's slack
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]


async def test_a_block_within_its_limit_is_left_alone() -> None:
    deadlines = Deadlines(resolution=0.05)
    async with deadlines.limit(0.2):
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.3)  # the slice's timer fires and finds no one to cancel
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]


async def test_many_limits_ending_together_share_one_timer() -> None:
    deadlines = Deadlines(resolution=0.05)
    entered = asyncio.Event()
    release = asyncio.Event()
    count = 0

    async def send() -> None:
        nonlocal count
        async with deadlines.limit(30):
            count += 1
            if count == 200:
                entered.set()
            await release.wait()

    tasks = [asyncio.create_task(send()) for _ in range(200)]
    await entered.wait()
    assert deadlines.timers <= 2  # those started in one slice, or across its edge
    release.set()
    await asyncio.gather(*tasks)


async def test_a_cancellation_from_elsewhere_stays_a_cancellation() -> None:
    deadlines = Deadlines(resolution=0.05)
    inside = asyncio.Event()

    async def send() -> None:
        async with deadlines.limit(30):
            inside.set()
            await asyncio.sleep(30)

    task = asyncio.create_task(send())
    await inside.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_only_the_expired_sends_time_out() -> None:
    deadlines = Deadlines(resolution=0.05)

    async def send(seconds: float, limit: float) -> str:
        try:
            async with deadlines.limit(limit):
                await asyncio.sleep(seconds)
        except TimeoutError:
            return "timeout"
        return "ok"

    results = await asyncio.gather(*(send(0.5 if n % 2 else 0.0, 0.1) for n in range(20)))
    assert results == ["ok" if n % 2 == 0 else "timeout" for n in range(20)]
