"""Reading a notification back (its deliveries, their history and, for email, what the
recipient did with it) and searching for notifications. (Accepting one is the
intake's: ``intake/``.)"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from tidings.clock import utcnow
from tidings.content.compose import NoTemplate, compose
from tidings.content.limits import push_payload_bytes
from tidings.content.render import RenderError
from tidings.content.sms import Segments
from tidings.content.variables import template_variables
from tidings.priorities import Channel
from tidings.service import Service
from tidings.store import cancels
from tidings.store.cancels import Cancelled
from tidings.store.engagement import EngagementSummary
from tidings.store.engagement import summary as engagement
from tidings.store.intake import Accepted, KeyConflict
from tidings.store.reads import DeliveryEvent, DeliveryRecord, NotificationRecord, get_notification
from tidings.store.search import (
    FoundDelivery,
    FoundNotification,
    Search,
    SearchPage,
    search_notifications,
)
from tidings.store.types import get_type
from tidings.store.users import get_user

__all__ = [
    "Accepted",
    "Cancelled",
    "DeliveryEvent",
    "DeliveryRecord",
    "EngagementSummary",
    "FoundDelivery",
    "FoundNotification",
    "KeyConflict",
    "NotificationRecord",
    "RenderedDelivery",
    "Search",
    "SearchPage",
    "cancel",
    "engagement",
    "get_notification",
    "rendered",
    "search_notifications",
]


@dataclass(frozen=True)
class RenderedDelivery:
    """A delivery's words rendered again for an operator to read (``rendered``); ``error``
    when they cannot be (the template gone, or a render error, as the send would have had)."""

    locale: str | None = None
    version: int | None = None
    subject: str | None = None
    text: str | None = None
    html: str | None = None
    data: dict[str, Any] | None = None
    segments: Segments | None = None
    payload_bytes: int | None = None
    error: str | None = None


async def rendered(
    service: Service, found: NotificationRecord, namespace: str
) -> dict[uuid.UUID, RenderedDelivery]:
    """Each delivery's content, through the send's own render path (``content/compose.py``)
    with the template version it was sent with (the newest if none yet), the notification's
    data and the user's profile as it is now. The unsubscribe link is a placeholder and
    tracked links are not rewritten: this shows the words, it makes no working links."""
    data = await cancels.notification_data(service.db, found.id, namespace)
    kind = await get_type(service.db, found.type)
    profile = await get_user(service.db, found.user_id) if found.user_id else None
    locale = found.locale or (profile.locale if profile else None)
    link = f"{service.settings.public_url}/u/PREVIEW" if found.category == "marketing" else None
    context = template_variables(data or {}, found.user_id, profile, locale, link)
    await service.templates.refresh_if_stale()
    default_locale = kind.default_locale if kind else None
    shown: dict[uuid.UUID, RenderedDelivery] = {}
    for d in found.deliveries:
        shown[d.id] = await _rendered_one(service, found.type, d, locale, default_locale, context)
    return shown


async def _rendered_one(
    service: Service,
    type_name: str,
    d: DeliveryRecord,
    locale: str | None,
    default_locale: str | None,
    context: dict[str, Any],
) -> RenderedDelivery:
    try:
        made = await compose(
            service.templates,
            type_name,
            d.channel,
            locale,
            default_locale,
            context,
            service.settings.sms_max_segments,
            version=d.template_version,
        )
    except NoTemplate as error:
        if d.channel == Channel.WEBHOOK.value:  # sent the notification's data as is
            return RenderedDelivery(data=context["data"])
        return RenderedDelivery(error=str(error))
    except RenderError as error:
        return RenderedDelivery(error=str(error))
    content = made.content
    return RenderedDelivery(
        locale=made.template.locale,
        version=made.template.version,
        subject=content.subject,
        text=content.text,
        html=content.html,
        data=content.data or None,
        segments=made.segments,
        payload_bytes=push_payload_bytes(content) if d.channel == Channel.PUSH.value else None,
    )


async def cancel(service: Service, notification_id: uuid.UUID, namespace: str) -> Cancelled | None:
    """Cancel what of the notification is not sent yet (``store/cancels.py``); None when
    the namespace has no such notification."""
    return await cancels.cancel_notification(service.db, notification_id, namespace, utcnow())
