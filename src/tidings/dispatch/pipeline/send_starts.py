"""Start marks: before an at-most-once account's provider call, the delivery's row records
that the call is starting (docs/architecture.md, Claims, leases, fences and the reaper).

Each send awaits its mark before calling the provider, so a mark costs a round trip to the
database; concurrent sends share it (a group commit): a mark queued while another group is
being written goes with the next group, up to ``max_in_flight`` groups at once. Each send
learns whether its fence held: one that did not is no longer its attempt's, and is not sent.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Sequence

from tidings import logs
from tidings.clock import utcnow
from tidings.store.engine import Database
from tidings.store.outcomes import SendStart, mark_sends_started

# Marks of a group, and their senders' futures: whether each fence held.
_Waiting = tuple[SendStart, asyncio.Future[bool]]
Mark = Callable[[Sequence[SendStart]], Awaitable[set[uuid.UUID]]]


class SendStarts:
    def __init__(
        self, db: Database, max_in_flight: int = 2, max_group: int = 1000, mark: Mark | None = None
    ) -> None:
        self._mark = mark or (lambda starts: mark_sends_started(db, starts, utcnow()))
        self._max_in_flight = max_in_flight
        self._max_group = max_group
        self._queue: list[_Waiting] = []
        # Counted by the writers themselves in the step of their last look at the queue
        # (as intake/group_commit.py does), so a mark never waits for a writer that left.
        self._writing = 0
        self._tasks: set[asyncio.Task[None]] = set()

    async def started(self, start: SendStart) -> bool:
        """Record ``start`` durably; whether its fence held (False: do not send). Raises
        what the database raised (the mark's state is then unknown: do not send either)."""
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._queue.append((start, future))
        self._start_writer()
        return await future

    def _start_writer(self) -> None:
        if not self._queue or self._writing >= self._max_in_flight:
            return
        self._writing += 1
        # A task of its own: a cancelled send must not abort the others' write.
        task = asyncio.create_task(self._write_all(), context=logs.context_without())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _write_all(self) -> None:
        try:
            while self._queue:
                group = self._queue[: self._max_group]
                del self._queue[: len(group)]
                await self._write(group)
        finally:
            self._writing -= 1
            self._start_writer()

    async def _write(self, group: list[_Waiting]) -> None:
        try:
            marked = await self._mark([start for start, _ in group])
        except Exception as error:
            for _, future in group:
                if not future.done():
                    future.set_exception(error)
            return
        except BaseException:
            for _, future in group:
                future.cancel()  # its sender is not sent: the mark's state is unknown
            raise
        for start, future in group:
            if not future.done():
                future.set_result(start.delivery_id in marked)
