"""What a provider tells its sender after accepting a message: SendGrid's Event Webhook and
Twilio's status callbacks and inbound replies, posted to tidings as the real ones are.

A simulated provider ``schedule``s posts; one background task sends them after the
provider's ``report_delay_ms`` (SendGrid in batches of up to 1,000 events, as it does).
Failed posts are retried a few times, then dropped and counted (``reportsFailed``): the
real providers give up too. Every report a provider decided is kept in
``ProviderState.reports``, so that a test can compare tidings' end state with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import httpx

from tidings.simulator.behaviour import ProviderState

log = logging.getLogger(__name__)
ATTEMPTS = 3
PARALLEL = 16
RETRY_SECONDS = 0.3
SendBatch = Callable[[httpx.AsyncClient, list[object]], Awaitable[httpx.Response]]


@dataclass
class Reporter:
    """A queue of reports to post in batches of ``batch`` items through ``send``."""

    state: ProviderState
    send: SendBatch
    batch: int = 1
    # The provider's own retry policy for a refused post (a behaviour's report_retry_ms
    # shortens the wait, never the count).
    attempts: int = ATTEMPTS
    retry_seconds: float = RETRY_SECONDS
    _queue: list[tuple[float, object]] = field(default_factory=list)
    _wake: asyncio.Event = field(default_factory=asyncio.Event)
    _task: asyncio.Task[None] | None = None
    _client: httpx.AsyncClient | None = None

    def schedule(self, item: object, delay_ms: float | None = None) -> None:
        """Post ``item`` after ``delay_ms`` (default: the provider's report delay)."""
        delay = self.state.behaviour.report_delay_ms if delay_ms is None else delay_ms
        due = asyncio.get_running_loop().time() + delay / 1000
        self._queue.append((due, item))
        self.state.counts["reports_scheduled"] += 1
        if self._task is None:
            self._client = httpx.AsyncClient(timeout=10)
            self._task = asyncio.create_task(self._run())
        self._wake.set()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            self._wake.clear()
            now = loop.time()
            due = [item for at, item in self._queue if at <= now]
            if not due:
                wait = min((at for at, _ in self._queue), default=now + 3600) - now
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout=max(wait, 0.001))
                continue
            self._queue = [(at, item) for at, item in self._queue if at > now]
            self.state.counts["reports_in_flight"] += len(due)
            batches = [due[start : start + self.batch] for start in range(0, len(due), self.batch)]
            try:
                # Like the real providers, several posts at once (in order per batch only).
                for start in range(0, len(batches), PARALLEL):
                    await asyncio.gather(*map(self._post, batches[start : start + PARALLEL]))
            finally:
                self.state.counts["reports_in_flight"] -= len(due)

    async def _post(self, items: list[object]) -> None:
        assert self._client is not None
        for attempt in range(self.attempts):
            try:
                response = await self.send(self._client, items)
                if response.is_success:
                    self.state.counts["reports_posted"] += len(items)
                    return
                self._warn("report refused: %s %s", response.status_code, response.text[:200])
            except httpx.HTTPError as error:
                self._warn("report not posted: %r", error)
            if attempt + 1 < self.attempts:
                await asyncio.sleep(self._retry_delay())
        self.state.counts["reports_failed"] += len(items)

    def _retry_delay(self) -> float:
        shorter = self.state.behaviour.report_retry_ms
        return self.retry_seconds if shorter is None else shorter / 1000

    def _warn(self, text: str, *args: object) -> None:
        """The first failure is a warning (tidings not listening?), the rest are counted."""
        level = logging.DEBUG if self.state.counts["reports_warned"] else logging.WARNING
        self.state.counts["reports_warned"] += 1
        log.log(level, text, *args)
