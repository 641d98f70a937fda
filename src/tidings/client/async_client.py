"""``AsyncClient``: the asynchronous client, on ``httpx.AsyncClient``; the same methods as
``Client``, run with ``await``."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, TypeVar

import httpx

from . import calls
from .async_operations import AsyncOperations
from .base import DEFAULT_URL, ClientBase, own_client_check
from .calls import Call, finish
from .inputs import (
    KEEP,
    Category,
    Channel,
    Keep,
    NewCampaign,
    Notification,
    Profile,
    QuietHours,
    TypeDefinition,
)
from .results import (
    Accepted,
    BatchResult,
    Campaign,
    CampaignAccepted,
    CampaignPage,
    CancelResult,
    ChannelPreview,
    DryRun,
    Erased,
    NotificationPage,
    NotificationStatus,
    NotificationType,
    Preferences,
    Template,
    TemplateUpload,
    User,
    UserPage,
    UsersImported,
)
from .retrying import Backoff

T = TypeVar("T")


class AsyncClient(AsyncOperations, ClientBase):
    """The tidings API from asyncio code. ``retries`` is the number of further attempts
    after the first (connection errors, timeouts, 5xx and 429 only); ``http_client`` or
    ``transport`` replace the ``httpx.AsyncClient`` it would make (a given client's own timeout
    applies, and it is not closed by ``close``)."""

    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        *,
        api_key: str | None = None,
        timeout: float | httpx.Timeout = 10.0,
        retries: int = 3,
        backoff: Backoff | float = Backoff(),
        http_client: httpx.AsyncClient | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        own_client_check(http_client, transport)
        super().__init__(base_url, api_key, retries, backoff)
        self._owns_http = http_client is None
        self._http = http_client or httpx.AsyncClient(timeout=timeout, transport=transport)

    async def close(self) -> None:
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    async def _run(self, call: Call[T]) -> T:
        request = self._request(self._http, call)
        attempts = self._attempts()
        while True:
            try:
                response = await self._http.send(request)
            except httpx.TransportError as error:
                delay = attempts.after_error(error)
                if delay is None:
                    raise self._no_answer(call, error, attempts) from error
            else:
                delay = attempts.after_answer(response)
                if delay is None:
                    return finish(call, response)
            await asyncio.sleep(delay)

    # Notifications

    async def send(self, notification: Notification) -> Accepted:
        """Send one notification (``POST /v1/notifications``); refused before any request
        without ``business_id`` or ``idempotency_key``."""
        return await self._run(calls.send(notification))

    async def send_batch(self, notifications: Sequence[Notification]) -> BatchResult:
        """Send up to 1,000 notifications in one transaction; a result per item, in order."""
        return await self._run(calls.send_batch(notifications))

    async def get_notification(self, notification_id: str) -> NotificationStatus:
        """A notification's deliveries, their status and history."""
        return await self._run(calls.get_notification(notification_id))

    async def search_notifications(
        self,
        *,
        user_id: str | None = None,
        type: str | None = None,
        status: str | None = None,
        channel: str | None = None,
        campaign_id: str | None = None,
        address: str | None = None,
        start: datetime | None = None,
        end: datetime | None = None,
        limit: int = 50,
        after: str | None = None,
    ) -> NotificationPage:
        """Notifications newest first, found by any of user, type, delivery status,
        channel, campaign, exact address and time (``start`` included, ``end`` excluded,
        both with a time zone); ``after`` is the previous page's ``next``."""
        return await self._run(
            calls.search_notifications(
                user_id=user_id,
                type=type,
                status=status,
                channel=channel,
                campaign_id=campaign_id,
                address=address,
                start=start,
                end=end,
                limit=limit,
                after=after,
            )
        )

    # Campaigns

    async def create_campaign(self, campaign: NewCampaign) -> CampaignAccepted:
        """Schedule a campaign (needs ``business_id`` or ``idempotency_key``)."""
        return await self._run(calls.create_campaign(campaign))

    async def dry_run_campaign(self, campaign: NewCampaign) -> DryRun:
        """Forecast a campaign on today's data; nothing is stored."""
        return await self._run(calls.dry_run_campaign(campaign))

    async def get_campaign(self, campaign_id: str) -> Campaign:
        return await self._run(calls.get_campaign(campaign_id))

    async def list_campaigns(self, limit: int = 50, after: str | None = None) -> CampaignPage:
        """Campaigns, newest first; ``after`` is the previous page's ``next``."""
        return await self._run(calls.list_campaigns(limit, after))

    async def cancel_campaign(self, campaign_id: str) -> CancelResult:
        """Stop a campaign; repeating it answers the same counts."""
        return await self._run(calls.cancel_campaign(campaign_id))

    # Preferences

    async def get_preferences(self, user_id: str) -> Preferences:
        return await self._run(calls.get_preferences(user_id))

    async def set_preferences(
        self,
        user_id: str,
        categories: Mapping[Category, Mapping[Channel, bool]],
        *,
        quiet_hours: QuietHours | Keep | None = KEEP,
        timezone: str | Keep | None = KEEP,
        locale: str | Keep | None = KEEP,
    ) -> Preferences:
        """Replace the user's category/channel choices (those left out take the defaults);
        quiet hours, time zone and locale change only when given (``None`` clears)."""
        return await self._run(
            calls.set_preferences(user_id, categories, quiet_hours, timezone, locale)
        )

    # Templates

    async def put_template(
        self,
        type_name: str,
        channel: Channel,
        locale: str,
        *,
        subject: str | None = None,
        text: str | None = None,
        html: str | None = None,
        data: Mapping[str, str] | None = None,
    ) -> TemplateUpload:
        """Upload a new version; the newest version's text again stores nothing."""
        parts = {"subject": subject, "text": text, "html": html, "data": data}
        return await self._run(calls.put_template(type_name, channel, locale, parts))

    async def get_template(self, type_name: str, channel: Channel, locale: str) -> Template:
        """The newest version."""
        return (await self._run(calls.template_versions(type_name, channel, locale)))[0]

    async def template_versions(
        self, type_name: str, channel: Channel, locale: str
    ) -> list[Template]:
        """Every version, newest first."""
        return await self._run(calls.template_versions(type_name, channel, locale))

    async def list_templates(self, type_name: str) -> list[Template]:
        """The newest version of each (channel, locale) of a type."""
        return await self._run(calls.list_templates(type_name))

    async def preview(
        self,
        type_name: str,
        *,
        user_id: str | None = None,
        locale: str | None = None,
        data: Mapping[str, Any] | None = None,
        channels: Iterable[Channel] | None = None,
    ) -> dict[str, ChannelPreview]:
        """Render each channel of a type without sending; a channel that cannot be
        rendered shows its ``error``."""
        return await self._run(calls.preview(type_name, user_id, locale, data, channels))

    # Types and users

    async def put_type(self, name: str, definition: TypeDefinition) -> NotificationType:
        return await self._run(calls.put_type(name, definition))

    async def get_type(self, name: str) -> NotificationType:
        return await self._run(calls.get_type(name))

    async def put_user(self, user_id: str, profile: Profile) -> User:
        return await self._run(calls.put_user(user_id, profile))

    async def get_user(self, user_id: str) -> User:
        return await self._run(calls.get_user(user_id))

    async def list_users(
        self,
        *,
        id_prefix: str | None = None,
        attribute: str | None = None,
        equals: str | None = None,
        limit: int = 50,
        after: str | None = None,
    ) -> UserPage:
        """Profiles in id order, by id prefix and by a field or attribute's value."""
        return await self._run(
            calls.list_users(
                id_prefix=id_prefix, attribute=attribute, equals=equals, limit=limit, after=after
            )
        )

    async def put_users(self, users: Sequence[tuple[str, Profile]]) -> UsersImported:
        """Create or replace up to 1,000 profiles, all or none."""
        return await self._run(calls.put_users(users))

    async def erase_user(self, user_id: str) -> Erased:
        """Erase a user (GDPR/LGPD): what is theirs deleted, their addresses hashed."""
        return await self._run(calls.erase_user(user_id))
