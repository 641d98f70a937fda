"""Pushing events to producers' webhook endpoints (docs/events.md, Webhooks): fan the event
log out to each endpoint, then POST the due messages, signed per Standard Webhooks, with
retries and backoff for up to three days; an endpoint that fails that long is disabled."""

from __future__ import annotations

import asyncio
import logging
import random
from datetime import datetime, timedelta

import httpx
from pydantic import BaseModel, Field

from tidings.clock import utcnow
from tidings.providers import pinned_http
from tidings.providers.base import ProviderError
from tidings.store import producer_hooks
from tidings.store.engine import Database
from tidings.store.producer_hooks import Message
from tidings.tracking import standard_webhooks

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
    concurrency: int = Field(default=16, ge=1, le=256)
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
                    try:
                        await asyncio.wait_for(stop.wait(), self.settings.poll_interval)
                    except TimeoutError:
                        pass
        finally:
            await self._client.aclose()

    async def step(self) -> bool:
        """One round: fan out new events, send what is due; whether there was work."""
        now = utcnow()
        made = await producer_hooks.fan_out(self.db, 500, now)
        lease = timedelta(seconds=self.settings.lease_seconds)
        due = await producer_hooks.claim(self.db, self.settings.concurrency, now, lease)
        await asyncio.gather(*(self._send(message) for message in due))
        return bool(made or due)

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
