"""Request and response bodies of /v1/campaigns (camelCase on the wire), with the bounds of
every field: the audience, the segment language, spreadOver and localTime."""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Annotated, Any

from pydantic import Field, StringConstraints, field_validator, model_validator

from tidings.api.schemas import JsonObject, TimeZone, Topic
from tidings.campaigns.reads import PROFILE_FIELDS
from tidings.intake.requests import ApiModel, SendAt, TypeName, UserIdIn
from tidings.priorities import Channel, Priority

MAX_INLINE_USERS = 10_000
MAX_SPREAD = timedelta(days=7)
# The segment language's bounds: nesting, conditions, values of one "in", one value's length.
SEGMENT_DEPTH = 4
SEGMENT_CONDITIONS = 50
SEGMENT_IN_VALUES = 1_000
SEGMENT_TEXT = 255

_SHORT = re.compile(r"(?:(\d{1,7})d)?(?:(\d{1,7})h)?(?:(\d{1,7})m)?(?:(\d{1,9})s)?")
_ISO = re.compile(r"P(?:(\d{1,7})D)?(?:T(?:(\d{1,7})H)?(?:(\d{1,7})M)?(?:(\d{1,9})S)?)?")


def parse_duration(text: str) -> timedelta:
    """``30m``, ``1h30m``, ``90s``, ``2d`` or ISO 8601 (``PT30M``, ``P1DT2H``)."""
    if text.startswith("-"):
        raise ValueError("spreadOver must not be negative")
    match = _SHORT.fullmatch(text) or _ISO.fullmatch(text.upper())
    if not match or not any(match.groups()) or text.upper().endswith("T"):
        raise ValueError(
            "spreadOver is a duration such as '30m', '1h30m', '90s' or ISO 8601 'PT30M'"
        )
    days, hours, minutes, seconds = (int(g or 0) for g in match.groups())
    if days > MAX_SPREAD.days + 1 or hours > 10_000 or minutes > 100_000:
        raise ValueError(f"spreadOver must be at most {MAX_SPREAD.days} days")
    return timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)


def _spread(text: str) -> str:
    if parse_duration(text) > MAX_SPREAD:
        raise ValueError(f"spreadOver must be at most {MAX_SPREAD.days} days")
    return text


Spread = Annotated[str, StringConstraints(max_length=32)]
LocalTime = Annotated[str, StringConstraints(pattern=r"^([01][0-9]|2[0-3]):[0-5][0-9]$")]


def check_segment(segment: Any, depth: int = 1) -> int:
    """Raise ValueError unless ``segment`` is a condition of the segment language
    (store/audiences.py); the number of conditions it holds."""
    if not isinstance(segment, Mapping):
        raise ValueError("a segment condition is an object")
    if depth > SEGMENT_DEPTH:
        raise ValueError(f"a segment nests at most {SEGMENT_DEPTH} levels")
    for joiner in ("and", "or"):
        if joiner in segment:
            parts = segment[joiner]
            if set(segment) != {joiner} or not isinstance(parts, list) or not parts:
                raise ValueError(f"'{joiner}' takes a non-empty list of conditions, alone")
            total = sum(check_segment(part, depth + 1) for part in parts)
            if total > SEGMENT_CONDITIONS:
                raise ValueError(f"a segment holds at most {SEGMENT_CONDITIONS} conditions")
            return total
    _check_comparison(segment)
    return 1


def _check_comparison(segment: Mapping[str, Any]) -> None:
    operators = set(segment) - {"field"}
    if "field" not in segment or len(operators) != 1 or operators - {"equals", "in", "exists"}:
        raise ValueError(
            "a segment condition is {field, equals|in|exists} or {and|or: [...]}; "
            f"profile fields: {', '.join(PROFILE_FIELDS)}, any other name an attribute"
        )
    name = segment["field"]
    if not isinstance(name, str) or not 1 <= len(name) <= 100:
        raise ValueError("a segment field is a name of 1-100 characters")
    if "exists" in segment:
        if not isinstance(segment["exists"], bool):
            raise ValueError("'exists' is true or false")
        return
    values = segment["in"] if "in" in segment else [segment["equals"]]
    if "in" in segment and (not isinstance(values, list) or not 1 <= len(values) <= 1000):
        raise ValueError(f"'in' takes a list of 1-{SEGMENT_IN_VALUES} values")
    if not all(isinstance(v, str) and len(v) <= SEGMENT_TEXT for v in values):
        raise ValueError(f"segment values are strings of at most {SEGMENT_TEXT} characters")


class AudienceIn(ApiModel):
    """Exactly one of: a topic's followers, up to 10,000 user ids, or a segment."""

    topic: Topic | None = None
    followers_of: Topic | None = None  # another name for topic
    user_ids: list[UserIdIn] | None = Field(default=None, min_length=1, max_length=MAX_INLINE_USERS)
    segment: dict[str, Any] | None = Field(
        default=None,
        description=(
            "A condition over user profiles: {field, equals: text}, {field, in: [text]}, "
            "{field, exists: bool}, {and: [...]}, {or: [...]}. Fields email, phone, timezone, "
            "locale; any other name (or attributes.<name>) is a profile attribute."
        ),
    )

    @field_validator("segment")
    @classmethod
    def _segment(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            check_segment(value)
        return value

    @model_validator(mode="after")
    def _exactly_one(self) -> AudienceIn:
        given = [v for v in (self.topic, self.followers_of, self.user_ids, self.segment) if v]
        if len(given) != 1:
            raise ValueError("give exactly one of topic, followersOf, userIds or segment")
        return self

    def normalised(self) -> dict[str, Any]:
        if self.topic or self.followers_of:
            return {"topic": self.topic or self.followers_of}
        if self.user_ids:
            return {"userIds": list(self.user_ids)}
        return {"segment": self.segment}


class CampaignIn(ApiModel):
    name: Annotated[str, StringConstraints(min_length=1, max_length=200)] | None = None
    type: TypeName
    audience: AudienceIn
    data: JsonObject = Field(default_factory=dict)
    channels: list[Channel] | None = Field(default=None, min_length=1, max_length=4)
    priority: Priority | None = None
    send_at: SendAt | None = None
    spread_over: Spread | None = Field(
        default=None, description="'30m', '1h30m', '90s' or ISO 8601 'PT30M'; at most 7 days"
    )
    local_time: LocalTime | None = Field(
        default=None, description="HH:MM: each user at that time in their own time zone"
    )
    timezone: TimeZone | None = Field(
        default=None, description="the zone of users who have none (default UTC)"
    )

    @field_validator("spread_over")
    @classmethod
    def _spread_over(cls, value: str | None) -> str | None:
        return None if value is None else _spread(value)

    def spread_seconds(self) -> int:
        return int(parse_duration(self.spread_over).total_seconds()) if self.spread_over else 0


class CampaignAccepted(ApiModel):
    campaign_id: uuid.UUID
    status: str


class CampaignOut(ApiModel):
    campaign_id: uuid.UUID
    name: str | None
    type: str
    status: str
    priority: str
    channels: list[str]
    audience: dict[str, Any]
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
    # PAUSED by its reputation guard: why (cleared on resume), and when it last paused.
    paused_reason: str | None = None
    paused_at: datetime | None = None


class CampaignSummary(ApiModel):
    campaign_id: uuid.UUID
    name: str | None
    type: str
    status: str
    send_at: datetime
    audience_size: int | None
    expanded: int
    deliveries: int
    created_at: datetime


class CampaignList(ApiModel):
    campaigns: list[CampaignSummary]
    next: str | None = Field(description="pass as ?after= for the next page; null at the end")


class CancelOut(ApiModel):
    campaign_id: uuid.UUID
    status: str
    sent: int
    cancelled: int
    skipped: int
    failed: int
    expired: int
    in_progress: int


class ChannelForecast(ApiModel):
    channel: str
    deliveries: int
    would_send: int
    skipped: dict[str, int]
    deferred_by_quiet_hours: int
    estimated_seconds: float = Field(
        description="the window, or the time the channel's primary account needs at its rate "
        "and the campaign priority's share if longer"
    )


class HistogramBucket(ApiModel):
    start: datetime
    count: int


class DryRunOut(ApiModel):
    dry_run: bool = True
    audience_size: int
    channels: list[ChannelForecast]
    bucket_seconds: int
    histogram: list[HistogramBucket]
