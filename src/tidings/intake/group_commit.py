"""Group commit: concurrent single requests share one transaction (docs/architecture.md, Intake and
group commit).

While groups are being committed, newly arriving requests queue up and go together in the
next transaction. An idle service commits a lone request at once (no added delay); a busy
one answers many requests per commit, with up to ``max_in_flight`` commits under way (one
alone would leave the process idle while the database syncs). Each request is answered
only after the commit that holds it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


# Items waiting to be committed, and the future their submitter awaits.
_Waiting = tuple[Sequence[Item], asyncio.Future[list[Result]]]


class GroupCommit(Generic[Item, Result]):
    def __init__(
        self,
        commit: Callable[[Sequence[Item]], Awaitable[list[Result]]],
        max_items: int = 1000,
        max_in_flight: int = 4,
    ) -> None:
        self._commit = commit
        self._max_items = max_items
        self._max_in_flight = max_in_flight
        self._queue: list[_Waiting[Item, Result]] = []
        self._drainers: set[asyncio.Task[None]] = set()

    async def submit(self, items: Sequence[Item]) -> list[Result]:
        """Commit ``items`` (with whatever else is waiting); their results, in order."""
        future: asyncio.Future[list[Result]] = asyncio.get_running_loop().create_future()
        self._queue.append((items, future))
        if len(self._drainers) < self._max_in_flight:
            # A task of its own: a cancelled request must not abort the others' commit.
            drainer = asyncio.create_task(self._drain())
            self._drainers.add(drainer)
            drainer.add_done_callback(self._drainers.discard)
        return await future

    async def _drain(self) -> None:
        while self._queue:
            group = self._take_group()
            try:
                results = await self._commit([item for items, _ in group for item in items])
            except Exception as error:
                for _, future in group:
                    if not future.done():
                        future.set_exception(error)
                continue
            start = 0
            for items, future in group:
                if not future.done():
                    future.set_result(results[start : start + len(items)])
                start += len(items)

    def _take_group(self) -> list[_Waiting[Item, Result]]:
        group: list[_Waiting[Item, Result]] = []
        count = 0
        while self._queue and (not group or count + len(self._queue[0][0]) <= self._max_items):
            items, future = self._queue.pop(0)
            group.append((items, future))
            count += len(items)
        return group
