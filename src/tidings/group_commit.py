"""Group commit: concurrent single requests share one transaction (docs/architecture.md,
Intake and group commit); the intake's accepts and the send pipeline's start marks
(dispatch/pipeline/send_starts.py) both go through it.

While groups are being committed, newly arriving requests queue up and go together in the
next transaction. An idle service commits a lone request at once (no added delay); a busy
one answers many requests per commit, with up to ``max_in_flight`` commits under way (one
alone would leave the process idle while the database syncs). Each request is answered
only after the commit that holds it, and every queued request is answered: no future is
left that nobody will complete.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

from tidings import logs

Item = TypeVar("Item")
Result = TypeVar("Result")


class CommitAborted(Exception):
    """The commit holding a request was cancelled (shutdown): it may or may not have been
    committed, so the caller retries with the same idempotency key."""


# Items waiting to be committed, and the future their submitter awaits.
_Waiting = tuple[Sequence[Item], asyncio.Future[list[Result]]]


class GroupCommit(Generic[Item, Result]):
    def __init__(
        self,
        commit: Callable[[Sequence[Item]], Awaitable[list[Result]]],
        max_items: int = 1000,
        max_in_flight: int = 4,
        cancel_waiters: bool = False,
    ) -> None:
        """``cancel_waiters``: when a commit is cancelled (shutdown), cancel the requests it
        held instead of failing them with ``CommitAborted``."""
        self._commit = commit
        self._cancel_waiters = cancel_waiters
        self._max_items = max_items
        self._max_in_flight = max_in_flight
        self._queue: list[_Waiting[Item, Result]] = []
        # Counted by the drainers themselves, in the same step as their last look at the
        # queue: a done-callback runs a loop iteration later, and a submit in between saw a
        # full set of drainers that were in fact leaving, and started none.
        self._draining = 0
        self._tasks: set[asyncio.Task[None]] = set()

    async def submit(self, items: Sequence[Item]) -> list[Result]:
        """Commit ``items`` (with whatever else is waiting); their results, in order."""
        future: asyncio.Future[list[Result]] = asyncio.get_running_loop().create_future()
        self._queue.append((items, future))
        self._start_drainer()
        return await future

    def _start_drainer(self) -> None:
        if not self._queue or self._draining >= self._max_in_flight:
            return
        # A task of its own: a cancelled request must not abort the others' commit. It
        # commits every caller's items: its log lines carry no caller's request id.
        self._draining += 1
        task = asyncio.create_task(self._drain(), context=logs.context_without())
        self._tasks.add(task)  # the loop keeps only weak references to tasks
        task.add_done_callback(self._tasks.discard)

    async def _drain(self) -> None:
        try:
            while self._queue:
                await self._commit_group(self._take_group())
        finally:
            self._draining -= 1
            # Cancelled or failed outside a commit: whatever queued meanwhile still needs one.
            self._start_drainer()

    async def _commit_group(self, group: list[_Waiting[Item, Result]]) -> None:
        try:
            results = await self._commit([item for items, _ in group for item in items])
        except Exception as error:
            _fail(group, error)
            return
        except BaseException:
            if self._cancel_waiters:
                for _, future in group:
                    future.cancel()
            else:
                _fail(group, CommitAborted("the commit was cancelled; retry with the same key"))
            raise
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


def _fail(group: Sequence[_Waiting[Item, Result]], error: Exception) -> None:
    for _, future in group:
        if not future.done():
            future.set_exception(error)
