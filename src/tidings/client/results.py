"""What the API answers, as frozen dataclasses read from its camelCase JSON.

Fields the server adds later are ignored, so an older client keeps working; ids are
strings (the server's UUIDs as written).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .inputs import QuietHours

Json = dict[str, Any]


def _at(value: Any) -> datetime:
    return datetime.fromisoformat(value)


def _maybe_at(value: Any) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


@dataclass(frozen=True)
class AcceptedDelivery:
    id: str
    channel: str
    status: str  # PENDING, or SKIPPED when refused at accept (no address, opted out, ...)

    @classmethod
    def from_wire(cls, d: Json) -> AcceptedDelivery:
        return cls(id=d["id"], channel=d["channel"], status=d["status"])


def _accepted(values: list[Json] | None) -> tuple[AcceptedDelivery, ...]:
    return tuple(AcceptedDelivery.from_wire(d) for d in values or ())


@dataclass(frozen=True)
class Accepted:
    """A notification the server committed (202): it will not be lost. ``replayed`` is
    true when the key had been used before and this is that notification's answer."""

    id: str
    status: str
    deliveries: tuple[AcceptedDelivery, ...]
    idempotency_key: str
    replayed: bool

    @classmethod
    def from_wire(cls, d: Json, idempotency_key: str, replayed: bool) -> Accepted:
        deliveries = _accepted(d["deliveries"])
        return cls(d["id"], d["status"], deliveries, idempotency_key, replayed)


@dataclass(frozen=True)
class ItemError:
    """Why the server refused one item of a batch."""

    code: str
    message: str
    field: str | None

    @classmethod
    def from_wire(cls, d: Json) -> ItemError:
        return cls(code=d["code"], message=d["message"], field=d.get("field"))


@dataclass(frozen=True)
class BatchItem:
    """One item's result, in the order sent: accepted (``id``, ``deliveries``) or refused
    (``error``). The server does not say whether an accepted item was a replay."""

    index: int
    idempotency_key: str
    status: str  # "accepted" or "error"
    id: str | None
    deliveries: tuple[AcceptedDelivery, ...]
    error: ItemError | None

    @property
    def accepted(self) -> bool:
        return self.status == "accepted"

    @classmethod
    def from_wire(cls, d: Json, idempotency_key: str) -> BatchItem:
        error = ItemError.from_wire(d["error"]) if d.get("error") else None
        deliveries = _accepted(d.get("deliveries"))
        return cls(d["index"], idempotency_key, d["status"], d.get("id"), deliveries, error)


@dataclass(frozen=True)
class BatchResult:
    items: tuple[BatchItem, ...]

    @property
    def accepted(self) -> tuple[BatchItem, ...]:
        return tuple(item for item in self.items if item.accepted)

    @property
    def refused(self) -> tuple[BatchItem, ...]:
        return tuple(item for item in self.items if not item.accepted)


@dataclass(frozen=True)
class HistoryEntry:
    kind: str  # accepted, sent, skipped, retry, lease_expired, delivered, bounced, ...
    at: datetime
    detail: Json | None

    @classmethod
    def from_wire(cls, d: Json) -> HistoryEntry:
        return cls(kind=d["kind"], at=_at(d["at"]), detail=d.get("detail"))


@dataclass(frozen=True)
class Delivery:
    """One (channel, address) of a notification, with its history."""

    id: str
    channel: str
    address: str  # masked by the server: a***@example.com
    status: str
    attempts: int
    next_attempt_at: datetime | None
    last_error: str | None
    failure_kind: str | None
    skip_reason: str | None
    provider: str | None
    provider_message_id: str | None
    template_version: int | None
    created_at: datetime
    sent_at: datetime | None
    updated_at: datetime
    history: tuple[HistoryEntry, ...]

    @classmethod
    def from_wire(cls, d: Json) -> Delivery:
        return cls(
            id=d["id"],
            channel=d["channel"],
            address=d["address"],
            status=d["status"],
            attempts=d["attempts"],
            next_attempt_at=_maybe_at(d.get("nextAttemptAt")),
            last_error=d.get("lastError"),
            failure_kind=d.get("failureKind"),
            skip_reason=d.get("skipReason"),
            provider=d.get("provider"),
            provider_message_id=d.get("providerMessageId"),
            template_version=d.get("templateVersion"),
            created_at=_at(d["createdAt"]),
            sent_at=_maybe_at(d.get("sentAt")),
            updated_at=_at(d["updatedAt"]),
            history=tuple(HistoryEntry.from_wire(e) for e in d["history"]),
        )


@dataclass(frozen=True)
class NotificationStatus:
    """``GET /v1/notifications/{id}``: the notification and each delivery's status."""

    id: str
    idempotency_key: str
    type: str
    category: str
    priority: str
    user_id: str | None
    locale: str | None
    send_at: datetime | None
    created_at: datetime
    deliveries: tuple[Delivery, ...]

    @classmethod
    def from_wire(cls, d: Json) -> NotificationStatus:
        return cls(
            id=d["id"],
            idempotency_key=d["idempotencyKey"],
            type=d["type"],
            category=d["category"],
            priority=d["priority"],
            user_id=d.get("userId"),
            locale=d.get("locale"),
            send_at=_maybe_at(d.get("sendAt")),
            created_at=_at(d["createdAt"]),
            deliveries=tuple(Delivery.from_wire(x) for x in d["deliveries"]),
        )


@dataclass(frozen=True)
class FoundDelivery:
    """A delivery as the search lists it: its state, not its history."""

    id: str
    channel: str
    address: str  # masked by the server
    status: str
    attempts: int
    failure_kind: str | None
    skip_reason: str | None
    provider: str | None
    sent_at: datetime | None
    updated_at: datetime

    @classmethod
    def from_wire(cls, d: Json) -> FoundDelivery:
        return cls(
            id=d["id"],
            channel=d["channel"],
            address=d["address"],
            status=d["status"],
            attempts=d["attempts"],
            failure_kind=d.get("failureKind"),
            skip_reason=d.get("skipReason"),
            provider=d.get("provider"),
            sent_at=_maybe_at(d.get("sentAt")),
            updated_at=_at(d["updatedAt"]),
        )


@dataclass(frozen=True)
class FoundNotification:
    id: str
    type: str
    category: str
    priority: str
    user_id: str | None
    campaign_id: str | None
    send_at: datetime | None
    created_at: datetime
    deliveries: tuple[FoundDelivery, ...]

    @classmethod
    def from_wire(cls, d: Json) -> FoundNotification:
        return cls(
            id=d["id"],
            type=d["type"],
            category=d["category"],
            priority=d["priority"],
            user_id=d.get("userId"),
            campaign_id=d.get("campaignId"),
            send_at=_maybe_at(d.get("sendAt")),
            created_at=_at(d["createdAt"]),
            deliveries=tuple(FoundDelivery.from_wire(x) for x in d["deliveries"]),
        )


@dataclass(frozen=True)
class NotificationPage:
    """``GET /v1/notifications``: newest first; pass ``next`` as ``after`` for older ones."""

    notifications: tuple[FoundNotification, ...]
    next: str | None

    @classmethod
    def from_wire(cls, d: Json) -> NotificationPage:
        found = tuple(FoundNotification.from_wire(n) for n in d["notifications"])
        return cls(notifications=found, next=d.get("next"))


@dataclass(frozen=True)
class CampaignAccepted:
    """A scheduled campaign (202). The server does not say whether this was a replay."""

    id: str
    status: str
    idempotency_key: str

    @classmethod
    def from_wire(cls, d: Json, idempotency_key: str) -> CampaignAccepted:
        return cls(id=d["campaignId"], status=d["status"], idempotency_key=idempotency_key)


@dataclass(frozen=True)
class Campaign:
    """``GET /v1/campaigns/{id}``: a campaign's definition and progress."""

    id: str
    name: str | None
    type: str
    status: str  # SCHEDULED, EXPANDING, SENDING, DONE, CANCELLED
    priority: str
    channels: tuple[str, ...]
    audience: Json  # a listed audience is shown by its size: {"userIds": 3}
    send_at: datetime
    spread_seconds: int
    local_time: str | None
    audience_size: int | None
    expanded: int
    deliveries: int
    by_status: dict[str, int]
    skipped_by_reason: dict[str, int]
    percent_done: float
    estimated_finish: datetime | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    paused_reason: str | None = None  # set while a campaign is held (resume_campaign)
    paused_at: datetime | None = None

    @classmethod
    def from_wire(cls, d: Json) -> Campaign:
        return cls(
            id=d["campaignId"],
            name=d.get("name"),
            type=d["type"],
            status=d["status"],
            priority=d["priority"],
            channels=tuple(d["channels"]),
            audience=d["audience"],
            send_at=_at(d["sendAt"]),
            spread_seconds=d["spreadSeconds"],
            local_time=d.get("localTime"),
            audience_size=d.get("audienceSize"),
            expanded=d["expanded"],
            deliveries=d["deliveries"],
            by_status=d["byStatus"],
            skipped_by_reason=d["skippedByReason"],
            percent_done=d["percentDone"],
            estimated_finish=_maybe_at(d.get("estimatedFinish")),
            created_at=_at(d["createdAt"]),
            started_at=_maybe_at(d.get("startedAt")),
            finished_at=_maybe_at(d.get("finishedAt")),
            paused_reason=d.get("pausedReason"),
            paused_at=_maybe_at(d.get("pausedAt")),
        )


@dataclass(frozen=True)
class CampaignSummary:
    id: str
    name: str | None
    type: str
    status: str
    send_at: datetime
    audience_size: int | None
    expanded: int
    deliveries: int
    created_at: datetime

    @classmethod
    def from_wire(cls, d: Json) -> CampaignSummary:
        return cls(
            id=d["campaignId"],
            name=d.get("name"),
            type=d["type"],
            status=d["status"],
            send_at=_at(d["sendAt"]),
            audience_size=d.get("audienceSize"),
            expanded=d["expanded"],
            deliveries=d["deliveries"],
            created_at=_at(d["createdAt"]),
        )


@dataclass(frozen=True)
class CampaignPage:
    """Campaigns, newest first; pass ``next`` as ``after`` for the following page."""

    campaigns: tuple[CampaignSummary, ...]
    next: str | None

    @classmethod
    def from_wire(cls, d: Json) -> CampaignPage:
        found = tuple(CampaignSummary.from_wire(c) for c in d["campaigns"])
        return cls(campaigns=found, next=d.get("next"))


@dataclass(frozen=True)
class CancelResult:
    """A cancelled campaign's counts; they add up to its deliveries once ``in_progress``
    is 0."""

    campaign_id: str
    status: str
    sent: int
    cancelled: int
    skipped: int
    failed: int
    expired: int
    in_progress: int

    @classmethod
    def from_wire(cls, d: Json) -> CancelResult:
        return cls(
            campaign_id=d["campaignId"],
            status=d["status"],
            sent=d["sent"],
            cancelled=d["cancelled"],
            skipped=d["skipped"],
            failed=d["failed"],
            expired=d["expired"],
            in_progress=d["inProgress"],
        )


@dataclass(frozen=True)
class ChannelForecast:
    channel: str
    deliveries: int
    would_send: int
    skipped: dict[str, int]
    deferred_by_quiet_hours: int
    estimated_seconds: float

    @classmethod
    def from_wire(cls, d: Json) -> ChannelForecast:
        return cls(
            channel=d["channel"],
            deliveries=d["deliveries"],
            would_send=d["wouldSend"],
            skipped=d["skipped"],
            deferred_by_quiet_hours=d["deferredByQuietHours"],
            estimated_seconds=d["estimatedSeconds"],
        )


@dataclass(frozen=True)
class DryRun:
    """A campaign's forecast on today's data; nothing was stored."""

    audience_size: int
    channels: tuple[ChannelForecast, ...]
    bucket_seconds: int
    histogram: tuple[tuple[datetime, int], ...]  # (bucket start, sends)

    @classmethod
    def from_wire(cls, d: Json) -> DryRun:
        return cls(
            audience_size=d["audienceSize"],
            channels=tuple(ChannelForecast.from_wire(c) for c in d["channels"]),
            bucket_seconds=d["bucketSeconds"],
            histogram=tuple((_at(b["start"]), b["count"]) for b in d["histogram"]),
        )


def _quiet_hours(value: Json | None) -> QuietHours | None:
    return None if value is None else QuietHours(start=value["from"], end=value["to"])


@dataclass(frozen=True)
class Preferences:
    """Every category and channel with the value that applies to the user."""

    user_id: str
    categories: dict[str, dict[str, bool]]
    quiet_hours: QuietHours | None
    timezone: str | None
    locale: str | None
    # Per category, the channels no choice switches off (shown on in ``categories``).
    required: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def from_wire(cls, d: Json) -> Preferences:
        return cls(
            user_id=d["userId"],
            categories=d["categories"],
            quiet_hours=_quiet_hours(d.get("quietHours")),
            timezone=d.get("timezone"),
            locale=d.get("locale"),
            required=d.get("required", {}),
        )


@dataclass(frozen=True)
class Template:
    """One version of a template (Jinja2 parts) of a type, channel and locale."""

    type: str
    channel: str
    locale: str
    version: int
    created_at: datetime
    subject: str | None
    text: str | None
    html: str | None
    data: dict[str, str] | None

    @classmethod
    def from_wire(cls, d: Json) -> Template:
        return cls(
            type=d["type"],
            channel=d["channel"],
            locale=d["locale"],
            version=d["version"],
            created_at=_at(d["createdAt"]),
            subject=d.get("subject"),
            text=d.get("text"),
            html=d.get("html"),
            data=d.get("data"),
        )


@dataclass(frozen=True)
class TemplateUpload:
    """``created`` is false when the text was the newest version's: nothing was stored."""

    template: Template
    created: bool


@dataclass(frozen=True)
class ChannelPreview:
    """What one channel would say, or ``error`` when it cannot be rendered."""

    locale: str | None
    version: int | None
    subject: str | None
    text: str | None
    html: str | None
    data: Json | None
    sms_segments: int | None
    sms_encoding: str | None
    payload_bytes: int | None
    error: str | None

    @classmethod
    def from_wire(cls, d: Json) -> ChannelPreview:
        segments = d.get("segments") or {}
        return cls(
            locale=d.get("locale"),
            version=d.get("version"),
            subject=d.get("subject"),
            text=d.get("text"),
            html=d.get("html"),
            data=d.get("data"),
            sms_segments=segments.get("count"),
            sms_encoding=segments.get("encoding"),
            payload_bytes=d.get("payloadBytes"),
            error=d.get("error"),
        )


@dataclass(frozen=True)
class NotificationType:
    name: str
    category: str
    priority: str
    channels: tuple[str, ...]
    ttl: int | None
    retry: Json | None
    required_channels: tuple[str, ...] | None
    default_locale: str | None
    collapse_key: str | None
    email: Json | None
    created_at: datetime
    updated_at: datetime

    @classmethod
    def from_wire(cls, d: Json) -> NotificationType:
        required = d.get("requiredChannels")
        return cls(
            name=d["name"],
            category=d["category"],
            priority=d["priority"],
            channels=tuple(d["channels"]),
            ttl=d.get("ttl"),
            retry=d.get("retry"),
            required_channels=None if required is None else tuple(required),
            default_locale=d.get("defaultLocale"),
            collapse_key=d.get("collapseKey"),
            email=d.get("email"),
            created_at=_at(d["createdAt"]),
            updated_at=_at(d["updatedAt"]),
        )


@dataclass(frozen=True)
class User:
    """A user profile: addresses, zone, locale and the attributes templates can use."""

    id: str
    email: str | None
    phone: str | None
    timezone: str | None
    locale: str | None
    attributes: Json | None
    quiet_hours: QuietHours | None
    created_at: datetime
    updated_at: datetime

    @classmethod
    def from_wire(cls, d: Json) -> User:
        return cls(
            id=d["id"],
            email=d.get("email"),
            phone=d.get("phone"),
            timezone=d.get("timezone"),
            locale=d.get("locale"),
            attributes=d.get("attributes"),
            quiet_hours=_quiet_hours(d.get("quietHours")),
            created_at=_at(d["createdAt"]),
            updated_at=_at(d["updatedAt"]),
        )


@dataclass(frozen=True)
class UserPage:
    """``GET /v1/users``: profiles in id order; pass ``next`` as ``after`` for more."""

    users: tuple[User, ...]
    next: str | None

    @classmethod
    def from_wire(cls, d: Json) -> UserPage:
        return cls(users=tuple(User.from_wire(u) for u in d["users"]), next=d.get("next"))


@dataclass(frozen=True)
class UsersImported:
    """``POST /v1/users/batch``: how many profiles were created and how many replaced."""

    created: int
    replaced: int

    @classmethod
    def from_wire(cls, d: Json) -> UsersImported:
        return cls(created=d["created"], replaced=d["replaced"])


@dataclass(frozen=True)
class Erased:
    """``DELETE /v1/users/{id}``: rows deleted, and rows whose addresses became a hash."""

    user_id: str
    profile: bool
    devices: int
    preferences: int
    topics: int
    frequency_counters: int
    inbox_messages: int
    replies: int
    deliveries: int
    events: int
    notifications: int
    suppressions: int

    @classmethod
    def from_wire(cls, d: Json) -> Erased:
        return cls(
            user_id=d["userId"],
            profile=d["profile"],
            devices=d["devices"],
            preferences=d["preferences"],
            topics=d["topics"],
            frequency_counters=d["frequencyCounters"],
            inbox_messages=d["inboxMessages"],
            replies=d["replies"],
            deliveries=d["deliveries"],
            events=d["events"],
            notifications=d["notifications"],
            suppressions=d["suppressions"],
        )
