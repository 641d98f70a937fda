"""Group commit never strands a request: every submit is answered, whatever the timings."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence

import pytest

from tidings.group_commit import CommitAborted, GroupCommit


async def _yield(times: int) -> None:
    for _ in range(times):
        await asyncio.sleep(0)


async def _run_seed(seed: int) -> None:
    rng = random.Random(seed)

    async def commit(items: Sequence[int]) -> list[int]:
        await _yield(rng.randint(0, 3))  # a transaction's round trips, of varying length
        return [item * 2 for item in items]

    group = GroupCommit(commit, max_items=rng.randint(1, 5), max_in_flight=rng.randint(1, 3))

    async def request(value: int) -> list[int]:
        await _yield(rng.randint(0, 8))  # arrival times that land between drainer steps
        return await group.submit([value])

    count = rng.randint(1, 30)
    try:
        results = await asyncio.wait_for(
            asyncio.gather(*(request(i) for i in range(count))), timeout=2
        )
    except TimeoutError:
        pytest.fail(f"seed {seed}: a request was left waiting on a future nobody completes")
    assert results == [[i * 2] for i in range(count)]


async def test_no_request_is_stranded_under_random_arrival_timings() -> None:
    for seed in range(400):
        await _run_seed(seed)


async def test_a_cancelled_commit_answers_its_group_and_the_queue_goes_on() -> None:
    calls = 0

    async def commit(items: Sequence[int]) -> list[int]:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.01)
        if calls == 1:
            raise asyncio.CancelledError  # not an Exception: it used to skip the waiters
        return list(items)

    group = GroupCommit(commit, max_in_flight=1)
    first = asyncio.create_task(group.submit([1]))
    await asyncio.sleep(0)
    later = asyncio.create_task(group.submit([2]))
    with pytest.raises(CommitAborted):
        await asyncio.wait_for(first, timeout=2)
    assert await asyncio.wait_for(later, timeout=2) == [2]


async def test_a_cancelled_drainer_leaves_no_queued_request_behind() -> None:
    started = asyncio.Event()

    async def commit(items: Sequence[int]) -> list[int]:
        started.set()
        await asyncio.sleep(0.01)
        return list(items)

    group = GroupCommit(commit, max_in_flight=1)
    first = asyncio.create_task(group.submit([1]))
    await started.wait()
    later = asyncio.create_task(group.submit([2]))
    await asyncio.sleep(0)
    for task in list(group._tasks):  # e.g. a shutdown cancelling the drainer mid-commit
        task.cancel()
    with pytest.raises(CommitAborted):
        await asyncio.wait_for(first, timeout=2)
    assert await asyncio.wait_for(later, timeout=2) == [2]
