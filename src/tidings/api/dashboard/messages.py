"""The dashboard's Messages pages: the search of notifications (the API's, with the same
checks) and one notification with each delivery's rendered words and timeline, addresses
masked."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic import Field, ValidationError

from tidings.api.errors import validation_message
from tidings.api.masking import mask_address
from tidings.api.routes.notifications import (
    delivery_out,
    found_out,
    next_cursor,
    search_of,
)
from tidings.api.schemas import DeliveryOut, FoundNotificationOut
from tidings.intake.requests import ApiModel
from tidings.priorities import Channel
from tidings.refusal import Refusal
from tidings.service import Service
from tidings.services import notifications
from tidings.services.notifications import NotificationRecord, RenderedDelivery
from tidings.states import Status

PAGE = 50
FILTERS = ("userId", "address", "type", "campaignId", "status", "channel", "from", "to")


class Filters(ApiModel):
    """The form's fields, bounded as the API's parameters are."""

    user_id: str | None = Field(default=None, min_length=1, max_length=255)
    address: str | None = Field(default=None, min_length=1, max_length=2048)
    type: str | None = Field(default=None, min_length=1, max_length=100)
    campaign_id: uuid.UUID | None = None
    status: Status | None = None
    channel: Channel | None = None
    start: datetime | None = Field(default=None, alias="from")
    end: datetime | None = Field(default=None, alias="to")
    after: str | None = Field(default=None, max_length=100)


@dataclass(frozen=True)
class MessagesView:
    asked: dict[str, str]  # the form's fields as given, shown back
    found: list[FoundNotificationOut] = field(default_factory=list)
    next: str | None = None
    error: str | None = None
    statuses: tuple[str, ...] = tuple(s.value for s in Status)
    channels: tuple[str, ...] = tuple(c.value for c in Channel)


async def messages(service: Service, namespace: str, query: Mapping[str, str]) -> MessagesView:
    asked = {name: query[name] for name in (*FILTERS, "after") if query.get(name)}
    try:
        filters = Filters.model_validate(asked)
        search = search_of(
            namespace,
            PAGE,
            user_id=filters.user_id,
            type=filters.type,
            status=filters.status,
            channel=filters.channel,
            campaign_id=filters.campaign_id,
            address=filters.address,
            start=filters.start,
            end=filters.end,
            after=filters.after,
        )
    except ValidationError as error:
        return MessagesView(asked, error=validation_message(dict(error.errors()[0])))
    except Refusal as refusal:
        return MessagesView(asked, error=refusal.message)
    page = await notifications.search_notifications(service.db, search)
    found = [found_out(n) for n in page.notifications]
    return MessagesView(asked, found, next_cursor(page))


@dataclass(frozen=True)
class Shown:
    """A delivery's rendered words as the page shows them: every address of the
    notification's deliveries masked, as the API masks them, wherever the words repeat it."""

    locale: str | None
    version: int | None
    subject: str | None
    text: str | None
    html: str | None  # shown in a sandboxed iframe's srcdoc (escaped by the template)
    payload: str | None  # push: the APNs payload; webhook: the JSON body; else the data
    segments: str | None  # SMS: "2 segments, GSM-7 (170 units)"
    payload_bytes: int | None
    error: str | None


@dataclass(frozen=True)
class MessageView:
    id: uuid.UUID
    type: str
    category: str
    priority: str
    user_id: str | None
    created_at: datetime
    send_at: datetime | None
    deliveries: list[DeliveryOut]
    shown: dict[uuid.UUID, Shown]

    @property
    def cancellable(self) -> bool:
        """Something not yet claimed that a cancel would stop."""
        return any(d.status in ("PENDING", "QUEUED") for d in self.deliveries)


async def message(service: Service, namespace: str, notification_id: uuid.UUID) -> Any:
    found = await notifications.get_notification(service.db, notification_id, namespace)
    if found is None:
        return None
    words = await notifications.rendered(service, found, namespace)
    masks = _masks(found)
    return MessageView(
        id=found.id,
        type=found.type,
        category=found.category,
        priority=found.priority,
        user_id=found.user_id,
        created_at=found.created_at,
        send_at=found.send_at,
        deliveries=[delivery_out(d) for d in found.deliveries],
        shown={d.id: shown(d.channel, words[d.id], masks) for d in found.deliveries},
    )


def _masks(found: NotificationRecord) -> dict[str, str]:
    """Each address the notification went to, and its masked form; longest first, so that
    an address inside another is replaced after it."""
    pairs = {d.address: mask_address(d.channel, d.address) for d in found.deliveries}
    return dict(sorted(((a, m) for a, m in pairs.items() if a), key=lambda p: -len(p[0])))


def _masked(text: str | None, masks: Mapping[str, str]) -> str | None:
    if text is None:
        return None
    for address, masked in masks.items():
        text = text.replace(address, masked)
    return text


def shown(channel: str, words: RenderedDelivery, masks: Mapping[str, str]) -> Shown:
    payload: dict[str, Any] | None = words.data
    if channel == Channel.PUSH.value and words.error is None:
        alert = {"title": words.subject, "body": words.text}
        payload = {"aps": {"alert": alert}, **(words.data or {})}
    counted = words.segments
    return Shown(
        locale=words.locale,
        version=words.version,
        subject=_masked(words.subject, masks),
        text=_masked(words.text, masks),
        html=_masked(words.html, masks),
        payload=_masked(_json(payload), masks),
        segments=(
            f"{counted.count} segment{'s' if counted.count != 1 else ''}, {counted.encoding} "
            f"({counted.units} units)"
            if counted
            else None
        ),
        payload_bytes=words.payload_bytes,
        error=_masked(words.error, masks),
    )


def _json(value: dict[str, Any] | None) -> str | None:
    return None if value is None else json.dumps(value, indent=2, ensure_ascii=False)
