"""One call shared by concurrent callers: a cache reload that many tasks ask for at once
(every lane's sends, every request when the cache turns stale) reads the database once."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable


class SingleFlight:
    def __init__(self, call: Callable[[], Awaitable[None]]) -> None:
        self._call = call
        self._running: asyncio.Future[None] | None = None

    async def __call__(self) -> None:
        """Run the call, or join the one in flight. A caller that needs what was written
        after a call started must call again once it returns."""
        if self._running is None or self._running.done():
            self._running = asyncio.ensure_future(self._call())
        # Shielded: one caller cancelled does not cancel the call the others wait for.
        await asyncio.shield(self._running)
