"""What a caller sends: notifications, recipients, campaigns and their audiences.

Frozen dataclasses, turned into the API's camelCase JSON by ``wire()``; fields left as
``None`` are not sent, so the server's defaults apply.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from datetime import datetime, timedelta
from enum import Enum
from typing import Any, Literal

from .keys import resolve_key

Channel = Literal[
    "email", "sms", "push", "webhook", "slack", "discord", "teams", "telegram", "whatsapp"
]
Priority = Literal["high", "normal", "low"]
Category = Literal["transactional", "reminder", "marketing"]


class Keep(Enum):
    """A setting's default in an update: leave it as it is (``None`` clears it)."""

    KEEP = "keep"


KEEP = Keep.KEEP


def compact(values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` without its ``None`` entries."""
    return {name: value for name, value in values.items() if value is not None}


def _listed(values: Iterable[str] | None) -> list[str] | None:
    return None if values is None else list(values)


def _instant(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


@dataclass(frozen=True)
class Recipient:
    """Addresses given with the notification (instead of, or besides, a user's profile)."""

    email: str | None = None
    phone: str | None = None
    device_tokens: Sequence[str] | None = None
    webhook_url: str | None = None

    def wire(self) -> dict[str, Any]:
        return compact(
            {
                "email": self.email,
                "phone": self.phone,
                "deviceTokens": _listed(self.device_tokens),
                "webhookUrl": self.webhook_url,
            }
        )


@dataclass(frozen=True)
class EmailOptions:
    """Where a reply goes and who gets a copy (at most 10 each; no copies of marketing)."""

    reply_to: str | None = None
    cc: Sequence[str] | None = None
    bcc: Sequence[str] | None = None

    def wire(self) -> dict[str, Any]:
        return compact({"replyTo": self.reply_to, "cc": _listed(self.cc), "bcc": _listed(self.bcc)})


@dataclass(frozen=True)
class Notification:
    """One notification to send. Give ``business_id`` (the key is derived from it and the
    type) or an explicit ``idempotency_key``."""

    type: str
    _: KW_ONLY
    user_id: str | None = None
    to: Recipient | None = None
    data: Mapping[str, Any] = field(default_factory=dict)
    channels: Sequence[Channel] | None = None
    priority: Priority | None = None
    locale: str | None = None
    send_at: datetime | None = None
    email: EmailOptions | None = None
    business_id: str | None = None
    idempotency_key: str | None = None

    def key(self) -> str:
        """The Idempotency-Key this notification is sent with."""
        return resolve_key(self.type, self.business_id, self.idempotency_key)

    def wire(self) -> dict[str, Any]:
        return compact(
            {
                "type": self.type,
                "userId": self.user_id,
                "to": self.to.wire() if self.to else None,
                "data": dict(self.data),
                "channels": _listed(self.channels),
                "priority": self.priority,
                "locale": self.locale,
                "sendAt": _instant(self.send_at),
                "email": self.email.wire() if self.email else None,
            }
        )


@dataclass(frozen=True)
class Audience:
    """Who a campaign goes to: build one with ``topic``, ``users`` or ``segment``."""

    wire: Mapping[str, Any]

    @classmethod
    def topic(cls, topic: str) -> Audience:
        """The followers of a topic (``PUT /v1/topics/{topic}/subscribers``)."""
        return cls({"topic": topic})

    @classmethod
    def users(cls, user_ids: Iterable[str]) -> Audience:
        """1-10,000 listed users."""
        return cls({"userIds": list(user_ids)})

    @classmethod
    def segment(cls, condition: Mapping[str, Any]) -> Audience:
        """Profiles matching a condition, e.g. ``{"field": "city", "equals": "Recife"}``."""
        return cls({"segment": dict(condition)})


def _duration(value: str | timedelta | None) -> str | None:
    if isinstance(value, timedelta):
        return f"{int(value.total_seconds())}s"
    return value


@dataclass(frozen=True)
class NewCampaign:
    """A campaign to schedule (or forecast). ``spread_over`` is a ``timedelta`` or the API's
    text (``"30m"``, ``"PT30M"``); ``local_time`` is ``"HH:MM"``."""

    type: str
    audience: Audience
    _: KW_ONLY
    name: str | None = None
    data: Mapping[str, Any] = field(default_factory=dict)
    channels: Sequence[Channel] | None = None
    priority: Priority | None = None
    send_at: datetime | None = None
    spread_over: str | timedelta | None = None
    local_time: str | None = None
    timezone: str | None = None
    business_id: str | None = None
    idempotency_key: str | None = None

    def key(self) -> str:
        return resolve_key(self.type, self.business_id, self.idempotency_key)

    def wire(self) -> dict[str, Any]:
        return compact(
            {
                "name": self.name,
                "type": self.type,
                "audience": dict(self.audience.wire),
                "data": dict(self.data),
                "channels": _listed(self.channels),
                "priority": self.priority,
                "sendAt": _instant(self.send_at),
                "spreadOver": _duration(self.spread_over),
                "localTime": self.local_time,
                "timezone": self.timezone,
            }
        )


@dataclass(frozen=True)
class QuietHours:
    """A daily window (``"HH:MM"``, the user's local time) in which marketing and reminder
    push and SMS wait; ``end`` may be before ``start`` (across midnight)."""

    start: str
    end: str

    def wire(self) -> dict[str, str]:
        return {"from": self.start, "to": self.end}


@dataclass(frozen=True)
class TypeDefinition:
    """A notification type: its category, highest priority and channels (``PUT
    /v1/types/{name}`` replaces the whole definition). ``retry`` takes ``maxAttempts``,
    ``baseDelay``, ``maxDelay``; ``email`` takes ``fromAddress``, ``fromName``, ``replyTo``."""

    category: Category
    priority: Priority
    channels: Sequence[Channel]
    _: KW_ONLY
    ttl: int | None = None
    required_channels: Sequence[Channel] | None = None
    default_locale: str | None = None
    collapse_key: str | None = None
    retry: Mapping[str, float] | None = None
    email: Mapping[str, str] | None = None

    def wire(self) -> dict[str, Any]:
        return compact(
            {
                "category": self.category,
                "priority": self.priority,
                "channels": list(self.channels),
                "ttl": self.ttl,
                "requiredChannels": _listed(self.required_channels),
                "defaultLocale": self.default_locale,
                "collapseKey": self.collapse_key,
                "retry": None if self.retry is None else dict(self.retry),
                "email": None if self.email is None else dict(self.email),
            }
        )


@dataclass(frozen=True)
class Profile:
    """A user profile (``PUT /v1/users/{id}`` replaces it: fields left out are cleared)."""

    email: str | None = None
    phone: str | None = None
    timezone: str | None = None
    locale: str | None = None
    attributes: Mapping[str, Any] | None = None

    def wire(self) -> dict[str, Any]:
        attributes = None if self.attributes is None else dict(self.attributes)
        return compact(
            {
                "email": self.email,
                "phone": self.phone,
                "timezone": self.timezone,
                "locale": self.locale,
                "attributes": attributes,
            }
        )
