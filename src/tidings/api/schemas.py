"""Request and response bodies of the HTTP API (camelCase on the wire)."""

from __future__ import annotations

import json
import re
import uuid
import zoneinfo
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from email_validator import EmailNotValidError, validate_email
from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StringConstraints,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from tidings.priorities import Category, Channel, Priority

# fullmatch everywhere: with match() and "$", "+15559990000\n" passed (and skipped the
# suppression of +15559990000).
_E164 = re.compile(r"\+[1-9][0-9]{1,14}")  # not \d: it matches other digits too


def _e164(value: str) -> str:
    if not _E164.fullmatch(value):
        raise ValueError("phone must be in E.164 format, for example +5511912345678")
    return value


def _http_url(value: str) -> str:
    """An http(s) URL that an HTTP client can send to: checked here, not when it fails."""
    if any(c.isspace() or not c.isprintable() for c in value):
        raise ValueError("webhookUrl must not contain spaces or control characters")
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("webhookUrl must be an http or https URL with a host")
    if not all(c.isalnum() or c in "-._:" for c in parts.hostname):
        raise ValueError("webhookUrl has an invalid host")
    try:
        parts.port  # noqa: B018 - raises ValueError for a port that is not 0-65535
    except ValueError:
        raise ValueError("webhookUrl has an invalid port (it must be 1-65535)") from None
    return value


def _timezone(value: str) -> str:
    try:
        zoneinfo.ZoneInfo(value)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown IANA time zone {value!r}") from None
    return value


MAX_JSON_DEPTH = 32


def json_depth_over(value: Any, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether ``value`` nests objects and arrays more than ``limit`` deep (iteratively:
    a deep value must not exhaust the stack checking it)."""
    stack: list[tuple[Any, int]] = [(value, 1)] if isinstance(value, dict | list) else []
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        children = node.values() if isinstance(node, dict) else node
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def _strict_json(value: dict[str, Any]) -> dict[str, Any]:
    if json_depth_over(value):
        raise ValueError(f"nested deeper than {MAX_JSON_DEPTH} levels")
    # Python's JSON parser accepts NaN and Infinity; no database JSON type does.
    try:
        json.dumps(value, allow_nan=False)
    except ValueError:
        raise ValueError("NaN and Infinity are not valid JSON numbers") from None
    return value


# sendAt is stored as UTC: a far date in a far offset does not convert (9999-12-31 at -14:00).
MAX_SEND_AHEAD = timedelta(days=365)


def _send_at(value: datetime) -> datetime:
    try:
        in_utc = value.astimezone(UTC)
    except OverflowError:
        raise ValueError("sendAt is out of range") from None
    if in_utc > datetime.now(UTC) + MAX_SEND_AHEAD:
        raise ValueError(f"sendAt must be at most {MAX_SEND_AHEAD.days} days ahead") from None
    return value


# Plain ASCII addresses (nearly all of them) are checked here; anything else goes to the
# full validator, which is correct but costs ~40 µs an address, a third of a batch's time.
_ASCII_EMAIL = re.compile(
    r"(?P<local>[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*)"
    r"@(?P<domain>(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+"
    r"[A-Za-z](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)"
)


def _email(value: str) -> str:
    match = _ASCII_EMAIL.fullmatch(value) if value.isascii() and len(value) <= 254 else None
    if match and len(match["local"]) <= 64:
        return f"{match['local']}@{match['domain'].lower()}"
    try:
        return validate_email(value, check_deliverability=False).normalized
    except EmailNotValidError as error:
        raise ValueError(f"not a valid email address: {error}") from None


JsonObject = Annotated[dict[str, Any], AfterValidator(_strict_json)]
# The OpenAPI document says what the validators accept (clients and schemathesis read it).
Email = Annotated[str, AfterValidator(_email), Field(json_schema_extra={"format": "email"})]
Phone = Annotated[
    str, AfterValidator(_e164), Field(json_schema_extra={"pattern": r"^\+[1-9][0-9]{1,14}$"})
]
TimeZone = Annotated[str, StringConstraints(max_length=64), AfterValidator(_timezone)]
# pydantic's patterns run on Rust's regex engine, where "$" is the end of the text (a final
# newline does not match; tests/test_input_limits.py checks it). 35: the locale columns.
Locale = Annotated[
    str, StringConstraints(max_length=35, pattern=r"^[A-Za-z]{2,3}([-_][A-Za-z0-9]{2,8})*$")
]
SendAt = Annotated[AwareDatetime, AfterValidator(_send_at)]
TypeName = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9._:-]{0,99}$")]
UserId = Annotated[str, StringConstraints(min_length=1, max_length=255)]
# At most 1,024: addresses sit in btree indexes, whose entries must stay under ~2.7 kB.
DeviceToken = Annotated[str, StringConstraints(min_length=1, max_length=1024)]
WebhookUrl = Annotated[
    str,
    StringConstraints(max_length=2048),
    AfterValidator(_http_url),
]
IdempotencyKey = Annotated[str, StringConstraints(min_length=1, max_length=255)]


class ApiModel(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )


class Recipient(ApiModel):
    email: Email | None = None
    phone: Phone | None = None
    device_tokens: list[DeviceToken] | None = Field(default=None, max_length=100)
    webhook_url: WebhookUrl | None = None


class NotificationIn(ApiModel):
    type: TypeName
    user_id: UserId | None = None
    to: Recipient | None = None
    data: dict[str, Any] = Field(default_factory=dict)  # NaN, depth: refused in drafts.py
    channels: list[Channel] | None = Field(default=None, min_length=1)
    priority: Priority | None = None
    locale: Locale | None = None
    send_at: SendAt | None = None


class BatchItemIn(NotificationIn):
    idempotency_key: IdempotencyKey


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
        default=None, description="push: a newer notification replaces an undelivered one"
    )

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
    timezone: TimeZone | None = None
    locale: Locale | None = None
    attributes: JsonObject | None = None


class UserOut(UserIn):
    id: str
    quiet_hours: QuietHours | None = None
    created_at: datetime
    updated_at: datetime


class DeviceIn(ApiModel):
    user_id: UserId
    platform: Literal["ios", "android", "web"]
    token: DeviceToken


class DeviceOut(DeviceIn):
    active: bool
    deactivated_reason: str | None = None
    created_at: datetime
    updated_at: datetime


class HistoryEntry(ApiModel):
    kind: str
    at: datetime
    detail: dict[str, Any] | None = None


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


class SuppressionIn(ApiModel):
    reason: str = Field(default="manual", min_length=1, max_length=255)


class SuppressionOut(ApiModel):
    channel: str
    address: str
    reason: str
    created_at: datetime


_CLOCK = r"^([01][0-9]|2[0-3]):[0-5][0-9]$"


class QuietHours(ApiModel):
    from_: str = Field(alias="from", pattern=_CLOCK, description="HH:MM, local time")
    to: str = Field(pattern=_CLOCK, description="HH:MM, local time; may be before `from`")

    @model_validator(mode="after")
    def _not_empty(self) -> QuietHours:
        if self.from_ == self.to:
            raise ValueError("quietHours.from and quietHours.to must differ")
        return self


class PreferencesIn(ApiModel):
    # Strict: the schema says boolean, so 0, 1 or "yes" are refused, not guessed at.
    categories: dict[Category, dict[Channel, StrictBool]] = Field(default_factory=dict)
    quiet_hours: QuietHours | None = None
    timezone: TimeZone | None = None
    locale: Locale | None = None


class PreferencesOut(ApiModel):
    user_id: str
    categories: dict[str, dict[str, bool]]
    quiet_hours: QuietHours | None
    timezone: str | None
    locale: str | None


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
    user_id: UserId | None = None
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
