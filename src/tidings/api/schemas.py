"""Request and response bodies of the HTTP API (camelCase on the wire).

The notification requests themselves (``NotificationIn``, ``BatchItemIn``, ``Recipient``) and
their field types live in ``intake/requests.py``, beside the code that consumes them.
"""

from __future__ import annotations

import json
import re
import uuid
import zoneinfo
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BeforeValidator,
    Field,
    StrictBool,
    StringConstraints,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from tidings.intake.requests import (
    MAX_JSON_DEPTH,
    ApiModel,
    BatchItemIn,
    DeviceToken,
    DiscordAddress,
    DisplayName,
    Email,
    Locale,
    Phone,
    SlackAddress,
    TeamsAddress,
    TelegramAddress,
    TypeName,
    UserIdIn,
    WhatsAppAddress,
    json_depth_over,
)
from tidings.priorities import Category, Channel, Priority
from tidings.providers.webpush.subscription import looks_like_subscription
from tidings.providers.webpush.subscription import parse as parse_subscription
from tidings.states import FailureKind
from tidings.workflows.shape import MAX_STEPS


def _timezone(value: str) -> str:
    try:
        zoneinfo.ZoneInfo(value)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown IANA time zone {value!r}") from None
    return value


def _strict_json(value: dict[str, Any]) -> dict[str, Any]:
    if json_depth_over(value):
        raise ValueError(f"nested deeper than {MAX_JSON_DEPTH} levels")
    # Python's JSON parser accepts NaN and Infinity; no database JSON type does.
    try:
        json.dumps(value, allow_nan=False)
    except ValueError:
        raise ValueError("NaN and Infinity are not valid JSON numbers") from None
    return value


JsonObject = Annotated[dict[str, Any], AfterValidator(_strict_json)]
TimeZone = Annotated[str, StringConstraints(max_length=64), AfterValidator(_timezone)]


MAX_BATCH = 1000


class BatchIn(ApiModel):
    notifications: list[BatchItemIn] = Field(min_length=1, max_length=MAX_BATCH)


class BatchEnvelope(ApiModel):
    """A batch whose items are not all valid: each is then checked on its own."""

    notifications: list[dict[str, Any]] = Field(min_length=1, max_length=MAX_BATCH)


class DeliveryAccepted(ApiModel):
    id: uuid.UUID
    channel: str
    status: str


class NotificationAccepted(ApiModel):
    id: uuid.UUID
    notification_id: uuid.UUID = Field(description="the same as id")
    status: Literal["accepted"] = "accepted"
    deliveries: list[DeliveryAccepted]


class FieldProblem(ApiModel):
    field: str | None = None
    message: str


class ErrorBody(ApiModel):
    code: str
    message: str
    field: str | None = None
    problems: list[FieldProblem] | None = Field(
        default=None,
        description="every problem found in the request, when there is more than one "
        "(`message` and `field` describe the first)",
    )


class ErrorResponse(ApiModel):
    error: ErrorBody


class BatchItemResult(ApiModel):
    index: int
    id: uuid.UUID | None = None
    notification_id: uuid.UUID | None = Field(default=None, description="the same as id")
    status: Literal["accepted", "error"]
    deliveries: list[DeliveryAccepted] | None = None
    error: ErrorBody | None = None


class BatchResult(ApiModel):
    results: list[BatchItemResult]


class RetryOverrides(ApiModel):
    max_attempts: int | None = Field(default=None, ge=1, le=100)
    base_delay: float | None = Field(default=None, gt=0, le=3600)
    max_delay: float | None = Field(default=None, gt=0, le=86400)

    @field_validator("max_delay")
    @classmethod
    def _not_below_base(cls, value: float | None, info: ValidationInfo) -> float | None:
        base = info.data.get("base_delay")
        if value is not None and base is not None and value < base:
            raise ValueError("maxDelay must not be below baseDelay")
        return value


MAX_TTL = 30 * 24 * 3600


class TypeEmail(ApiModel):
    """Who a type's email comes from, when not the account's own sender."""

    from_address: Email | None = Field(
        default=None,
        description="the From address of this type's email (the provider must accept it: a "
        "verified sender or domain)",
    )
    from_name: DisplayName | None = None
    reply_to: Email | None = Field(
        default=None, description="where replies go, unless a notification says otherwise"
    )

    @model_validator(mode="after")
    def _name_needs_address(self) -> TypeEmail:
        if self.from_name is not None and self.from_address is None:
            raise ValueError("fromName needs fromAddress")
        return self


def _collapse_key_bytes(value: str | None) -> str | None:
    if value is not None and len(value.encode()) > COLLAPSE_KEY_BYTES:
        raise ValueError(f"collapseKey must be at most {COLLAPSE_KEY_BYTES} bytes as UTF-8")
    return value


COLLAPSE_KEY_BYTES = 64


class TypeTracking(ApiModel):
    opens: StrictBool | None = None
    clicks: StrictBool | None = None


class TypeIn(ApiModel):
    category: Category
    priority: Priority
    channels: list[Channel] = Field(min_length=1)
    ttl: int | None = Field(
        default=None,
        gt=0,
        le=MAX_TTL,
        description="seconds after which an unsent delivery expires (at most 30 days)",
    )
    retry: RetryOverrides | None = None
    required_channels: list[Channel] | None = Field(
        default=None,
        description="channels that preferences cannot switch off; default: all channels of "
        "a transactional type, none of others",
    )
    default_locale: Locale | None = Field(
        default=None,
        description="the locale whose template is used when the recipient's has none "
        "(before falling back to en)",
    )
    collapse_key: Annotated[str, StringConstraints(min_length=1, max_length=64)] | None = Field(
        default=None,
        description="push: a newer notification replaces an undelivered one (at most 64 "
        "bytes as UTF-8: APNs' limit for apns-collapse-id)",
    )
    email: TypeEmail | None = None
    tracking: TypeTracking | None = Field(
        default=None,
        description="opens and clicks measured by tidings in this type's email (an open "
        "pixel, links rewritten to signed redirects); default: on for marketing, off for "
        "other categories",
    )

    workflow: list[Any] | None = Field(
        default=None,
        max_length=MAX_STEPS,
        description="steps run in order for each notification: send, wait, digest, "
        "throttle (docs/workflows.md); none: every channel is sent at once",
    )

    _collapse_key_fits = field_validator("collapse_key")(_collapse_key_bytes)

    @field_validator("required_channels")
    @classmethod
    def _within_channels(
        cls, value: list[Channel] | None, info: ValidationInfo
    ) -> list[Channel] | None:
        channels: list[Channel] = info.data.get("channels") or []  # missing: said already
        outside = [c.value for c in value or [] if channels and c not in channels]
        if outside:
            raise ValueError(f"requiredChannels must be among channels; not: {', '.join(outside)}")
        return value


class TypeOut(TypeIn):
    name: str
    created_at: datetime
    updated_at: datetime


class UserIn(ApiModel):
    email: Email | None = None
    phone: Phone | None = None
    # The chat channels' addresses (docs/providers.md, Chat).
    slack: SlackAddress | None = None
    discord: DiscordAddress | None = None
    teams: TeamsAddress | None = None
    telegram: TelegramAddress | None = None
    whatsapp: WhatsAppAddress | None = None
    timezone: TimeZone | None = None
    locale: Locale | None = None
    attributes: JsonObject | None = None


class UserOut(UserIn):
    id: str
    quiet_hours: QuietHours | None = None
    created_at: datetime
    updated_at: datetime


class UserBatchItem(UserIn):
    id: UserIdIn


class UserBatchIn(ApiModel):
    users: list[UserBatchItem] = Field(min_length=1, max_length=1000)

    @field_validator("users")
    @classmethod
    def _distinct(cls, users: list[UserBatchItem]) -> list[UserBatchItem]:
        seen: set[str] = set()
        for user in users:
            if user.id in seen:
                raise ValueError(f"user {user.id!r} is given twice")
            seen.add(user.id)
        return users


class UserBatchOut(ApiModel):
    created: int
    replaced: int


class ErasedOut(ApiModel):
    """What DELETE /v1/users/{id} erased: rows deleted, and rows whose addresses were
    replaced by their one-way hash."""

    user_id: str
    profile: bool = Field(description="the profile existed and is deleted")
    devices: int
    preferences: int
    topics: int
    frequency_counters: int
    inbox_messages: int
    replies: int = Field(description="SMS replies from the user's phone, deleted")
    deliveries: int = Field(description="deliveries whose address is now its hash")
    events: int = Field(description="history entries whose details named an address")
    notifications: int = Field(description="notifications whose data named an address")
    suppressions: int = Field(description="suppressed addresses now kept by their hash")


class UserPage(ApiModel):
    users: list[UserOut] = Field(description="in id order")
    next: str | None = Field(description="the cursor of the next page (after=); null: none")


class DeviceIn(ApiModel):
    user_id: UserIdIn
    platform: Literal["ios", "android", "web"]
    token: DeviceToken

    @field_validator("token")
    @classmethod
    def _web_subscription(cls, token: str, info: ValidationInfo) -> str:
        """A web token written as JSON is a Web Push subscription: checked, and stored in
        its canonical form (docs/providers.md, Web Push); other web tokens are opaque."""
        if info.data.get("platform") == "web" and looks_like_subscription(token):
            return parse_subscription(token).canonical()
        return token


class DeviceOut(DeviceIn):
    active: bool
    deactivated_reason: str | None = None
    created_at: datetime
    updated_at: datetime


class HistoryEntry(ApiModel):
    kind: str
    at: datetime
    detail: dict[str, Any] | None = None


class Engagement(ApiModel):
    """Opens and clicks tidings measured (docs/tracking.md); human opens leave out machine
    fetches (Apple Mail Privacy Protection, scanners)."""

    opens: int
    human_opens: int
    clicks: int
    first_opened_at: datetime | None
    first_clicked_at: datetime | None


class DeliveryOut(ApiModel):
    id: uuid.UUID
    channel: str
    address: str
    status: str
    attempts: int
    next_attempt_at: datetime | None
    last_error: str | None
    failure_kind: str | None
    skip_reason: str | None
    provider: str | None
    provider_message_id: str | None
    template_version: int | None = Field(
        default=None, description="the version of the template the delivery was sent with"
    )
    created_at: datetime
    sent_at: datetime | None
    updated_at: datetime
    history: list[HistoryEntry]
    engagement: Engagement | None = Field(
        default=None, description="email only: opens and clicks measured by tidings"
    )


class StepOut(ApiModel):
    """One step of a notification's workflow (docs/workflows.md)."""

    index: int
    kind: str
    state: str = Field(description="WAITING, PENDING, RUNNING, DONE, SKIPPED, CANCELLED, FAILED")
    due_at: datetime | None = Field(description="when it is due (PENDING), or was")
    ran_at: datetime | None
    skip_reason: str | None = Field(description="engaged: an unless found its event")
    attempts: int


class NotificationOut(ApiModel):
    id: uuid.UUID
    idempotency_key: str
    type: str
    category: str
    priority: str
    user_id: str | None
    locale: str | None
    send_at: datetime | None
    created_at: datetime
    deliveries: list[DeliveryOut]
    steps: list[StepOut] | None = Field(
        default=None, description="its type's workflow, step by step; none without one"
    )


class FoundDeliveryOut(ApiModel):
    id: uuid.UUID
    channel: str
    address: str = Field(description="masked")
    status: str
    attempts: int
    failure_kind: str | None
    skip_reason: str | None
    provider: str | None
    sent_at: datetime | None
    updated_at: datetime


class FoundNotificationOut(ApiModel):
    id: uuid.UUID
    type: str
    category: str
    priority: str
    user_id: str | None
    campaign_id: uuid.UUID | None
    send_at: datetime | None
    created_at: datetime
    deliveries: list[FoundDeliveryOut]


class NotificationPage(ApiModel):
    notifications: list[FoundNotificationOut] = Field(description="newest first")
    next: str | None = Field(
        description="the cursor of the next (older) page, to ask with as after=; null: none"
    )


class SuppressionIn(ApiModel):
    reason: str = Field(default="manual", min_length=1, max_length=255)


class SuppressionOut(ApiModel):
    channel: str
    address: str
    reason: str
    created_at: datetime


class InboundReplyOut(ApiModel):
    account: str
    sender: str = Field(description="the replying number, masked")
    keyword: str | None
    action: Literal["suppressed", "lifted", "none"]
    at: datetime


_CLOCK = r"^([01][0-9]|2[0-3]):[0-5][0-9]$"


class QuietHours(ApiModel):
    from_: str = Field(alias="from", pattern=_CLOCK, description="HH:MM, local time")
    to: str = Field(pattern=_CLOCK, description="HH:MM, local time; may be before `from`")

    @model_validator(mode="after")
    def _not_empty(self) -> QuietHours:
        if self.from_ == self.to:
            raise ValueError("quietHours.from and quietHours.to must differ")
        return self


# Strict: the schema says boolean, so 0, 1 or "yes" are refused, not guessed at.
ChannelChoices = dict[Channel, StrictBool]
_FLAT = 'a category\'s choices given at the top level, as in {"marketing": {"email": false}}'


class PreferencesIn(ApiModel):
    """The choices per category go in ``categories``, or at the top level under the
    category's name (one field per member of ``Category``); not both."""

    transactional: ChannelChoices | None = Field(default=None, description=_FLAT)
    reminder: ChannelChoices | None = Field(default=None, description=_FLAT)
    marketing: ChannelChoices | None = Field(default=None, description=_FLAT)
    categories: dict[Category, ChannelChoices] = Field(default_factory=dict)
    quiet_hours: QuietHours | None = None
    timezone: TimeZone | None = None
    locale: Locale | None = None

    @field_validator("categories")
    @classmethod
    def _one_shape(
        cls, value: dict[Category, ChannelChoices], info: ValidationInfo
    ) -> dict[Category, ChannelChoices]:
        flat = [c.value for c in Category if info.data.get(c.value) is not None]
        if flat:
            raise ValueError(
                f"give the choices in categories or at the top level ({', '.join(flat)}), not both"
            )
        return value

    def choices(self) -> dict[Category, ChannelChoices]:
        """The choices, whichever shape they came in."""
        flat = {c: getattr(self, c.value) for c in Category if getattr(self, c.value) is not None}
        return flat or dict(self.categories)


class PreferencesOut(ApiModel):
    user_id: str
    categories: dict[str, dict[str, bool]] = Field(
        description="every category and channel with the value that applies (a required "
        "channel is on)"
    )
    required: dict[str, list[str]] = Field(
        description="per category, the channels a choice does not switch off: every type of "
        "the category that sends on the channel requires it (requiredChannels; by default "
        "every channel of a transactional type)"
    )
    quiet_hours: QuietHours | None
    timezone: str | None
    locale: str | None


_ISO_DATE = re.compile(r"\d{4}-\d\d-\d\d")


def _iso_text(value: Any) -> Any:
    """A time is ISO 8601 text: pydantic would also take a number (seconds since 1970),
    which the schema (a date-time string) does not allow."""
    if isinstance(value, datetime):
        return value
    if not isinstance(value, str) or not _ISO_DATE.match(value):
        raise ValueError("give an ISO 8601 time with a time zone, e.g. 2026-12-05T08:00:00Z")
    return value


Moment = Annotated[AwareDatetime, BeforeValidator(_iso_text)]


class BulkReplayIn(ApiModel):
    """The dead letters to replay: as GET /v1/dead-letters filters them."""

    kind: list[FailureKind] | None = Field(default=None, max_length=10)
    type: str | None = Field(default=None, min_length=1, max_length=100)
    error: str | None = Field(default=None, min_length=1, max_length=200)
    since: Moment | None = Field(default=None, alias="from")
    until: Moment | None = Field(default=None, alias="to")
    limit: int = Field(default=1000, ge=1, le=1000)


class BulkReplayed(ApiModel):
    replayed: int = Field(description="PENDING again, with fresh attempts")
    changed: int = Field(description="matched, but no longer FAILED when their turn came")


class DeadLetter(ApiModel):
    id: uuid.UUID
    notification_id: uuid.UUID
    channel: str
    address: str
    failure_kind: str | None
    last_error: str | None
    attempts: int
    failed_at: datetime


class Replayed(ApiModel):
    id: uuid.UUID
    status: Literal["PENDING"]


TemplatePart = Annotated[str, StringConstraints(max_length=100_000)]


class TemplateIn(ApiModel):
    """One version of a template: Jinja2 text, rendered with the notification's data."""

    subject: TemplatePart | None = Field(
        default=None, description="email subject (required for email); push title"
    )
    text: TemplatePart | None = Field(
        default=None, description="the text body (required for SMS and push)"
    )
    html: TemplatePart | None = Field(default=None, description="email only: the HTML body")
    data: dict[str, TemplatePart] | None = Field(
        default=None, description="push only: custom key/value pairs (each value a template)"
    )


class TemplateOut(TemplateIn):
    type: str
    channel: Channel
    locale: str
    version: int
    created_at: datetime


class TemplateVersions(ApiModel):
    versions: list[TemplateOut]


class TemplateList(ApiModel):
    templates: list[TemplateOut]


class PreviewIn(ApiModel):
    type: TypeName
    user_id: UserIdIn | None = None
    locale: Locale | None = None
    data: JsonObject = Field(default_factory=dict)
    channels: list[Channel] | None = None


class SegmentsOut(ApiModel):
    encoding: str
    units: int
    count: int


class PreviewChannel(ApiModel):
    locale: str | None = None
    version: int | None = None
    subject: str | None = None
    text: str | None = None
    html: str | None = None
    data: dict[str, Any] | None = None
    segments: SegmentsOut | None = None
    payload_bytes: int | None = None
    error: str | None = None


class PreviewOut(ApiModel):
    channels: dict[str, PreviewChannel]


MAX_TOPIC_SUBSCRIBERS = 10_000
# One path segment: no "/" (an encoded %2F would not route), no control characters.
TOPIC_PATTERN = r"^[^/\x00-\x1f\x7f-\x9f]+$"


def _topic(value: str) -> str:
    # The same rule as TOPIC_PATTERN (which the schema shows), with a message that says why.
    if "/" in value:
        raise ValueError("a topic holds no '/': it is one path segment")
    if not re.fullmatch(TOPIC_PATTERN, value):
        raise ValueError("a topic holds no control characters (U+0000-U+001F, U+007F-U+009F)")
    return value


Topic = Annotated[
    str,
    StringConstraints(min_length=1, max_length=200),
    AfterValidator(_topic),
    WithJsonSchema({"type": "string", "minLength": 1, "maxLength": 200, "pattern": TOPIC_PATTERN}),
]


class SubscribersIn(ApiModel):
    # Duplicates are fine: each id counts once.
    user_ids: list[UserIdIn] = Field(min_length=1, max_length=MAX_TOPIC_SUBSCRIBERS)


class SubscribersAdded(ApiModel):
    topic: str
    added: int
    subscribers: int


class TopicOut(ApiModel):
    topic: str
    subscribers: int


class UserTopicsOut(ApiModel):
    user_id: str
    topics: list[str]


class EventOut(ApiModel):
    """One event, shaped as Standard Webhooks recommends: ``type``, ``timestamp``, ``data``
    (with the ids of its notification, delivery and campaign)."""

    id: str = Field(description="this event's cursor: ask for events after it")
    type: str
    timestamp: datetime
    data: dict[str, Any]


class EventPage(ApiModel):
    events: list[EventOut]
    next: str | None = Field(description="the cursor to ask with next (after=)")
    more: bool = Field(
        default=False,
        description="more events may follow next already: ask again at once, not after a pause",
    )


class EndpointIn(ApiModel):
    url: str = Field(min_length=1, max_length=2048)
    events: list[Annotated[str, StringConstraints(max_length=40)]] = Field(
        min_length=1, max_length=20, description="event types, as in GET /v1/events"
    )
    types: list[Annotated[str, StringConstraints(min_length=1, max_length=100)]] | None = Field(
        default=None, max_length=100, description="only these notification types"
    )


class EndpointOut(ApiModel):
    id: uuid.UUID
    url: str
    events: list[str]
    types: list[str] | None
    status: Literal["active", "disabled"]
    disabled_reason: str | None
    created_at: datetime


class EndpointCreated(EndpointOut):
    secret: str = Field(description="whsec_...: shown once; verify webhook-signature with it")


class SecretRotated(ApiModel):
    secret: str
    previous_valid_until: datetime


class EndpointAttempt(ApiModel):
    webhook_id: str
    type: str
    status: Literal["PENDING", "SENT", "FAILED"]
    attempts: int
    last_status: int | None
    last_error: str | None
    created_at: datetime
    sent_at: datetime | None
    next_attempt_at: datetime | None


class SkippedCounts(ApiModel):
    total: int
    by_reason: dict[str, int]


class OpenCounts(ApiModel):
    total: int
    unique: int = Field(description="deliveries opened at least once")
    unique_human: int = Field(
        description="deliveries opened at least once by other than a machine (Apple Mail "
        "Privacy Protection, scanners)"
    )


class ClickCounts(ApiModel):
    total: int
    unique: int = Field(description="deliveries with at least one click")


class ReportRates(ApiModel):
    """Shares of ``sent``; None while nothing was sent."""

    delivered: float | None
    bounced: float | None
    complained: float | None
    unsubscribed: float | None
    opened: float | None = Field(description="unique human opens / sent")
    clicked: float | None = Field(description="unique clicks / sent")


class Report(ApiModel):
    sent: int
    delivered: int
    bounced: int
    complained: int
    unsubscribed: int
    failed: int
    expired: int
    cancelled: int
    skipped: SkippedCounts
    opened: OpenCounts
    clicked: ClickCounts
    rates: ReportRates


class InboxItemOut(ApiModel):
    """One message of a user's inbox feed (docs/inbox.md)."""

    id: uuid.UUID
    notification_id: uuid.UUID
    type: str
    subject: str | None
    text: str
    data: dict[str, Any]
    created_at: datetime
    seen_at: datetime | None
    read_at: datetime | None
    archived_at: datetime | None


class InboxCounts(ApiModel):
    """Of the messages not archived: never seen, never read, all."""

    unseen: int
    unread: int
    total: int


class InboxFeedOut(ApiModel):
    items: list[InboxItemOut]
    next: str | None = Field(description="give it back as `after` for the next page")
    counts: InboxCounts


class InboxItemChanged(ApiModel):
    item: InboxItemOut
    counts: InboxCounts


class InboxAllChanged(ApiModel):
    changed: int
    counts: InboxCounts


class InboxTokenOut(ApiModel):
    token: str
    user_id: str
    expires_at: datetime
