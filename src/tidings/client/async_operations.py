"""``AsyncClient``'s calls about people and operations: ``sync_operations.py`` with
``await`` (tests/unit/test_client_surface.py checks that the two offer the same methods)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date, datetime
from typing import Literal, TypeVar

from . import calls_operations as ops
from . import calls_people as people
from .calls import Call
from .calls_operations import FailureKind
from .calls_people import Platform
from .inputs import Channel
from .results import Campaign
from .results_operations import (
    BulkReplayed,
    DeadLetter,
    EngagementRecorded,
    EventPage,
    Replayed,
    SecretRotated,
    WebhookAttempt,
    WebhookEndpoint,
)
from .results_people import Device, InboundReply, InboxToken, SubscribersAdded, Suppression, Topic
from .results_reports import GuardReset, Providers, Report

T = TypeVar("T")


class AsyncOperations:
    async def _run(self, call: Call[T]) -> T:
        raise NotImplementedError  # AsyncClient's, with its retries

    # Devices

    async def register_device(self, user_id: str, platform: Platform, token: str) -> Device:
        """Register a push token (registering it again reactivates it)."""
        return await self._run(people.register_device(user_id, platform, token))

    async def get_device(self, token: str) -> Device:
        return await self._run(people.get_device(token))

    async def delete_device(self, token: str) -> None:
        return await self._run(people.delete_device(token))

    async def list_devices(self, user_id: str) -> list[Device]:
        """A user's push tokens, active or not."""
        return await self._run(people.list_devices(user_id))

    # Topics

    async def subscribe(self, topic: str, user_ids: Iterable[str]) -> SubscribersAdded:
        """Add users to a topic (those already in it are left as they are)."""
        return await self._run(people.subscribe(topic, user_ids))

    async def unsubscribe(self, topic: str, user_id: str) -> None:
        return await self._run(people.unsubscribe(topic, user_id))

    async def get_topic(self, topic: str) -> Topic:
        """A topic's subscriber count (``NotFound`` when nobody follows it)."""
        return await self._run(people.get_topic(topic))

    async def user_topics(self, user_id: str) -> list[str]:
        """The topics a user follows, sorted."""
        return await self._run(people.user_topics(user_id))

    # Suppressions and replies

    async def suppress(
        self, channel: Channel, address: str, *, reason: str | None = None
    ) -> Suppression:
        """Never send to this address on this channel (the server's reason: ``manual``)."""
        return await self._run(people.suppress(channel, address, reason))

    async def get_suppression(self, channel: Channel, address: str) -> Suppression:
        return await self._run(people.get_suppression(channel, address))

    async def unsuppress(self, channel: Channel, address: str) -> None:
        """Allow sending to this address again."""
        return await self._run(people.unsuppress(channel, address))

    async def inbound_replies(
        self, *, keyword: str | None = None, limit: int = 100
    ) -> list[InboundReply]:
        """SMS and WhatsApp replies, newest first."""
        return await self._run(people.inbound_replies(keyword, limit))

    # Inbox

    async def inbox_token(self, user_id: str) -> InboxToken:
        """A token for a browser to read the user's inbox (docs/inbox.md)."""
        return await self._run(people.inbox_token(user_id))

    # Workflows

    async def cancel_notifications(self, cancel_key: str) -> int:
        """Cancel the pending steps of the notifications sent with this ``cancel_key``;
        answers how many notifications had some."""
        return await self._run(ops.cancel_notifications(cancel_key))

    async def record_engagement(
        self, delivery_id: str, event: Literal["opened", "clicked"]
    ) -> EngagementRecorded:
        """Tell tidings a delivery was opened or clicked (an escalation step then stops)."""
        return await self._run(ops.record_engagement(delivery_id, event))

    # Dead letters

    async def dead_letters(
        self,
        *,
        kinds: Iterable[FailureKind] | None = None,
        type: str | None = None,
        error: str | None = None,
        start: datetime | None = None,
        end: datetime | None = None,
        limit: int = 100,
    ) -> list[DeadLetter]:
        """Failed deliveries newest first (exhausted, poison and ambiguous unless ``kinds``
        is given), by type, text in the last error and time (``start`` included)."""
        return await self._run(ops.dead_letters(kinds, type, error, start, end, limit))

    async def replay_dead_letters(
        self,
        *,
        kinds: Iterable[FailureKind] | None = None,
        type: str | None = None,
        error: str | None = None,
        start: datetime | None = None,
        end: datetime | None = None,
        limit: int = 1000,
    ) -> BulkReplayed:
        """Replay up to ``limit`` dead letters the filter matches, newest first."""
        return await self._run(ops.replay_dead_letters(kinds, type, error, start, end, limit))

    async def replay_delivery(self, delivery_id: str) -> Replayed:
        """Send a FAILED delivery again (``Conflict`` when it is not FAILED)."""
        return await self._run(ops.replay_delivery(delivery_id))

    # Events

    async def events(
        self, *, after: str | None = None, types: Iterable[str] | None = None, limit: int = 100
    ) -> EventPage:
        """Events oldest first after the cursor ``after`` (a page's ``next``)."""
        return await self._run(ops.events(after, types, limit))

    # Webhook endpoints

    async def create_webhook_endpoint(
        self, url: str, events: Iterable[str], *, types: Iterable[str] | None = None
    ) -> WebhookEndpoint:
        """Post these events to ``url`` from now on; the answer alone holds the ``secret``."""
        return await self._run(ops.create_webhook_endpoint(url, events, types))

    async def list_webhook_endpoints(self) -> list[WebhookEndpoint]:
        return await self._run(ops.list_webhook_endpoints())

    async def get_webhook_endpoint(self, endpoint_id: str) -> WebhookEndpoint:
        return await self._run(ops.get_webhook_endpoint(endpoint_id))

    async def delete_webhook_endpoint(self, endpoint_id: str) -> None:
        return await self._run(ops.delete_webhook_endpoint(endpoint_id))

    async def rotate_webhook_secret(self, endpoint_id: str) -> SecretRotated:
        return await self._run(ops.rotate_webhook_secret(endpoint_id))

    async def enable_webhook_endpoint(self, endpoint_id: str) -> WebhookEndpoint:
        """Enable an endpoint that was disabled after failing too long."""
        return await self._run(ops.enable_webhook_endpoint(endpoint_id))

    async def webhook_attempts(self, endpoint_id: str, *, limit: int = 100) -> list[WebhookAttempt]:
        """The endpoint's recent deliveries of events, newest first."""
        return await self._run(ops.webhook_attempts(endpoint_id, limit))

    # Reports, campaigns, providers

    async def campaign_report(self, campaign_id: str) -> Report:
        return await self._run(ops.campaign_report(campaign_id))

    async def type_report(
        self, type_name: str, *, start: date | None = None, end: date | None = None
    ) -> Report:
        """A type's report over UTC days, both included (the server's default: 30 days)."""
        return await self._run(ops.type_report(type_name, start, end))

    async def resume_campaign(self, campaign_id: str) -> Campaign:
        """Resume a campaign paused by its reputation guard."""
        return await self._run(ops.resume_campaign(campaign_id))

    async def providers(self) -> Providers:
        return await self._run(ops.providers())

    async def reset_deactivation_guard(self, account: str) -> GuardReset:
        """Clear a push account's tripped guard and release the deliveries it held."""
        return await self._run(ops.reset_deactivation_guard(account))
