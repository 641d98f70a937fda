"""Group commit: concurrent single requests share transactions, each gets its own answer."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import httpx
import pytest

from tests.helpers import email_to, post, put_type
from tidings.group_commit import GroupCommit


class Recorder:
    def __init__(self, fail_on: int | None = None) -> None:
        self.groups: list[list[int]] = []
        self.fail_on = fail_on

    async def commit(self, items: Sequence[int]) -> list[int]:
        self.groups.append(list(items))
        await asyncio.sleep(0.01)  # a transaction's round trips
        if self.fail_on in items:
            raise RuntimeError("database went away")
        return [item * 10 for item in items]


async def test_concurrent_submits_share_commits_and_get_their_own_results() -> None:
    recorder = Recorder()
    group = GroupCommit(recorder.commit)
    results = await asyncio.gather(*(group.submit([i, i + 1000]) for i in range(50)))
    assert results == [[i * 10, (i + 1000) * 10] for i in range(50)]
    assert len(recorder.groups) < 10  # not one transaction per request
    assert sorted(x for g in recorder.groups for x in g) == sorted(
        [i for i in range(50)] + [i + 1000 for i in range(50)]
    )


async def test_a_lone_submit_is_committed_at_once() -> None:
    recorder = Recorder()
    group = GroupCommit(recorder.commit)
    assert await group.submit([7]) == [70]
    assert await group.submit([8]) == [80]
    assert recorder.groups == [[7], [8]]


async def test_a_failed_commit_fails_only_its_group() -> None:
    recorder = Recorder(fail_on=1)
    group = GroupCommit(recorder.commit)
    first = asyncio.create_task(group.submit([1]))
    await asyncio.sleep(0)  # the first group is in its commit
    later = asyncio.create_task(group.submit([2]))
    with pytest.raises(RuntimeError, match="went away"):
        await first
    assert await later == [20]


async def test_a_cancelled_submitter_does_not_abort_the_others() -> None:
    recorder = Recorder()
    group = GroupCommit(recorder.commit)
    leader = asyncio.create_task(group.submit([1]))
    await asyncio.sleep(0)
    follower = asyncio.create_task(group.submit([2]))
    await asyncio.sleep(0)
    leader.cancel()
    assert await follower == [20]
    assert [1] in recorder.groups  # the cancelled request's commit still ran


async def test_groups_stay_under_max_items() -> None:
    recorder = Recorder()
    group = GroupCommit(recorder.commit, max_items=5)
    await asyncio.gather(*(group.submit([i, i]) for i in range(20)))
    assert max(len(g) for g in recorder.groups) <= 5


async def test_a_bad_request_in_a_group_gets_its_own_error(client: httpx.AsyncClient) -> None:
    await put_type(client)
    bodies = [email_to(f"u{i}@example.com") for i in range(20)]
    bodies[7] = {**email_to(), "priority": "high"}  # valid JSON, refused by the type
    answers = await asyncio.gather(*(post(client, body) for body in bodies))
    codes = [a.status_code for a in answers]
    assert codes == [202] * 7 + [422] + [202] * 12
    assert len({a.json()["id"] for a in answers if a.status_code == 202}) == 19
