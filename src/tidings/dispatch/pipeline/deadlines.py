"""Time limits for many sends at once, at the cost of one timer per slice of time.

``asyncio.timeout`` schedules a timer per use and cancels it when the block ends: for a
dispatcher starting thousands of sends a second, most of which end in milliseconds, that
timer was a sixth of its CPU (docs/benchmarks.md, notes). Here every limit that ends in the
same slice of ``resolution`` seconds shares one timer: entering and leaving a limit is a set
insertion and removal. A limit may end up to ``resolution`` late, never early.

Inside the block the semantics are ``asyncio.timeout``'s: when time is up the task is
cancelled, and the block raises ``TimeoutError`` in place of that cancellation; a
cancellation from elsewhere passes through as it is.
"""

from __future__ import annotations

import asyncio
import math
from types import TracebackType


class Deadlines:
    """Shared timers for limits of ``seconds``, rounded up to ``resolution``."""

    def __init__(self, resolution: float = 0.05) -> None:
        if resolution <= 0:
            raise ValueError("resolution must be positive")
        self.resolution = resolution
        self._slices: dict[int, set[Limit]] = {}

    def limit(self, seconds: float) -> Limit:
        """An async context manager: the block may run at most ``seconds``."""
        return Limit(self, seconds)

    @property
    def timers(self) -> int:
        """Timers scheduled now (one per slice with a limit in it)."""
        return len(self._slices)

    def _enter(self, limit: Limit, ends_at: float) -> None:
        index = math.ceil(ends_at / self.resolution)
        members = self._slices.get(index)
        if members is None:
            members = self._slices[index] = set()
            asyncio.get_running_loop().call_at(index * self.resolution, self._expire, index)
        members.add(limit)
        limit._slice = index

    def _leave(self, limit: Limit) -> None:
        members = self._slices.get(limit._slice)
        if members is not None:
            members.discard(limit)  # an empty slice's timer still fires, finding no one

    def _expire(self, index: int) -> None:
        for limit in self._slices.pop(index, ()):
            limit._expire()


class Limit:
    __slots__ = ("_cancelling", "_deadlines", "_expired", "_seconds", "_slice", "_task")

    def __init__(self, deadlines: Deadlines, seconds: float) -> None:
        self._deadlines = deadlines
        self._seconds = seconds
        self._slice = 0
        self._expired = False
        self._task: asyncio.Task[object] | None = None
        self._cancelling = 0

    async def __aenter__(self) -> Limit:
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("a send limit needs a task")
        self._task = task
        self._cancelling = task.cancelling()
        loop = asyncio.get_running_loop()
        self._deadlines._enter(self, loop.time() + self._seconds)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._deadlines._leave(self)
        if not self._expired or self._task is None:
            return
        # Ours was the cancellation (no other one came with it): it becomes TimeoutError.
        if self._task.uncancel() <= self._cancelling and exc_type is asyncio.CancelledError:
            raise TimeoutError from exc

    def _expire(self) -> None:
        if self._task is not None and not self._task.done():
            self._expired = True
            self._task.cancel()
