"""Pushing events to producers' webhook endpoints (docs/events.md, Webhooks): fan the event
log out to each endpoint, then POST the due messages, signed per Standard Webhooks, with
retries and backoff for up to three days; an endpoint that fails that long is disabled."""

from __future__ import annotations

import asyncio
import logging
import random
import uuid
from datetime import datetime, timedelta

import httpx
from pydantic import BaseModel, Field

from tidings.clock import utcnow
from tidings.providers import pinned_http
from tidings.providers.base import PermanentError, ProviderError
from tidings.providers.webhook import signing as standard_webhooks
from tidings.store import producer_hooks
from tidings.store.engine import Database
from tidings.store.producer_hooks import Message

log = logging.getLogger(__name__)
USER_AGENT = "tidings-events/1"


class ProducerWebhookSettings(BaseModel):
    # Reach private and loopback endpoints (development and tests only).
    allow_private: bool = False
    timeout: float = Field(default=15.0, gt=0, le=120)
    # Seconds before each retry (the last repeats), jittered by a tenth.
    retry_delays: list[float] = Field(
        default_factory=lambda: [5.0, 30.0, 120.0, 600.0, 1800.0, 3600.0], min_length=1
    )
    give_up_after_hours: float = Field(default=72.0, gt=0)
    poll_interval: float = Field(default=0.5, gt=0, le=60)
    # Requests in flight in one process, and to one endpoint: a slow or hanging endpoint
    # holds at most its own share, never every sender's.
    concurrency: int = Field(default=32, ge=1, le=256)
    per_endpoint: int = Field(default=8, ge=1, le=256)
    lease_seconds: float = Field(default=60.0, gt=0)


class ProducerWebhooks:
    def __init__(self, db: Database, settings: ProducerWebhookSettings) -> None:
        self.db = db
        self.settings = settings
        self._client = httpx.AsyncClient(
            timeout=settings.timeout,
            follow_redirects=False,
            trust_env=False,  # a proxy from the environment would bypass the address check
            headers={"user-agent": USER_AGENT},
        )
        self._tasks: set[asyncio.Task[None]] = set()
        self._inflight: dict[uuid.UUID, int] = {}
        self._freed = asyncio.Event()

    async def run(self, stop: asyncio.Event) -> None:
        try:
            while not stop.is_set():
                try:
                    busy = await self.step()
                except Exception:
                    # One bad round (the database away a moment) must not end the process.
                    log.exception("producer webhooks: round failed; trying again")
                    busy = False
                if not busy:
                    await self._pause(stop)
            await self._drain()
        finally:
            await self._client.aclose()

    async def step(self) -> bool:
        """One round: fan out new events, start sending what is due where a sender is
        free (the sends go on past the round); whether there was work."""
        now = utcnow()
        endpoint_ids = await producer_hooks.active_endpoints(self.db)
        busy = await producer_hooks.fan_out(self.db, endpoint_ids, 500, now)
        lease = timedelta(seconds=self.settings.lease_seconds)
        due_at = await producer_hooks.with_due(self.db, now) if endpoint_ids else set()
        for endpoint_id in (e for e in endpoint_ids if e in due_at):
            free = min(
                self.settings.concurrency - len(self._tasks),
                self.settings.per_endpoint - self._inflight.get(endpoint_id, 0),
            )
            if free <= 0:
                continue
            due = await producer_hooks.claim(self.db, free, now, lease, endpoint_id)
            for message in due:
                self._start(message)
            busy = busy or bool(due)
        return busy

    def _start(self, message: Message) -> None:
        endpoint_id = message.endpoint.id
        self._inflight[endpoint_id] = self._inflight.get(endpoint_id, 0) + 1
        task = asyncio.create_task(self._send_logged(message))
        self._tasks.add(task)

        def finished(_: asyncio.Task[None]) -> None:
            self._tasks.discard(task)
            self._inflight[endpoint_id] -= 1
            if not self._inflight[endpoint_id]:
                del self._inflight[endpoint_id]
            self._freed.set()

        task.add_done_callback(finished)

    async def _pause(self, stop: asyncio.Event) -> None:
        """Until the poll interval ends, a sender is freed, or stop is set."""
        self._freed.clear()
        waits = [asyncio.ensure_future(stop.wait())]
        if self._tasks:
            waits.append(asyncio.ensure_future(self._freed.wait()))
        _, pending = await asyncio.wait(
            waits, timeout=self.settings.poll_interval, return_when=asyncio.FIRST_COMPLETED
        )
        for waiting in pending:
            waiting.cancel()

    async def _drain(self) -> None:
        """Let the sends under way finish (their messages leased meanwhile would otherwise
        wait a whole lease to be sent again)."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=self.settings.timeout + 1)

    async def _send_logged(self, message: Message) -> None:
        try:
            await self._send(message)
        except Exception:
            # Its outcome could not be written (the database away): the lease runs out and
            # the message is sent again, which webhook-id lets the receiver tell.
            log.exception("producer webhooks: message %s: outcome not written", message.id)

    async def _send(self, message: Message) -> None:
        now = utcnow()
        status: int | None = None
        try:
            status = await self._post(message, now)
            if 200 <= status < 300:
                await producer_hooks.sent(self.db, message.id, status, utcnow())
                return
            error = f"HTTP {status}"
        except ProviderError as failure:
            error = str(failure)[:300]
            if isinstance(failure, PermanentError) and failure.reason == "invalid_target":
                # A URL no request can be made to (stored before the API refused such
                # URLs): retrying for a day cannot help, the endpoint is disabled now.
                await producer_hooks.give_up(self.db, message, None, error, now)
                return
        except Exception as failure:  # whatever one endpoint does, the others go on
            error = type(failure).__name__
        await self._failed(message, status, error, now)

    async def _post(self, message: Message, now: datetime) -> int:
        url = pinned_http.target(message.endpoint.url, allow_insecure=True)
        addresses = await pinned_http.checked_addresses(url, self.settings.allow_private)
        body = message.body.encode()
        msg_id = f"msg_{message.id.hex}"
        secrets = message.endpoint.secrets(now)
        headers = standard_webhooks.headers(secrets, msg_id, body, int(now.timestamp()))
        headers["content-type"] = "application/json"
        answer = await pinned_http.post(
            self._client, "webhook endpoint", url, addresses, body, headers
        )
        return answer.status

    async def _failed(
        self, message: Message, status: int | None, error: str, now: datetime
    ) -> None:
        limit = timedelta(hours=self.settings.give_up_after_hours)
        if now - message.first_attempt_at >= limit:
            log.warning("webhook endpoint %s disabled: %s", message.endpoint.id, error)
            await producer_hooks.give_up(self.db, message, status, error, now)
            return
        delays = self.settings.retry_delays
        delay = delays[min(message.attempts - 1, len(delays) - 1)]
        at = now + timedelta(seconds=delay * random.uniform(0.9, 1.1))
        await producer_hooks.retry(self.db, message.id, status, error, at)
