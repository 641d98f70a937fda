"""What the API answers to operators: dead letters, the event feed, webhook endpoints,
reports, providers and the workflow calls (frozen dataclasses read from camelCase JSON)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from .results import Json, _at, _maybe_at

# Dead letters and workflows


@dataclass(frozen=True)
class DeadLetter:
    """A delivery that failed for good (``address`` masked as the API shows it)."""

    id: str
    notification_id: str
    channel: str
    address: str
    failure_kind: str | None
    last_error: str | None
    attempts: int
    failed_at: datetime

    @classmethod
    def from_wire(cls, d: Json) -> DeadLetter:
        return cls(
            id=d["id"],
            notification_id=d["notificationId"],
            channel=d["channel"],
            address=d["address"],
            failure_kind=d.get("failureKind"),
            last_error=d.get("lastError"),
            attempts=d["attempts"],
            failed_at=_at(d["failedAt"]),
        )


@dataclass(frozen=True)
class BulkReplayed:
    """``replayed`` dead letters made PENDING again; ``changed`` rows were written."""

    replayed: int
    changed: int

    @classmethod
    def from_wire(cls, d: Json) -> BulkReplayed:
        return cls(replayed=d["replayed"], changed=d["changed"])


@dataclass(frozen=True)
class Replayed:
    id: str
    status: str

    @classmethod
    def from_wire(cls, d: Json) -> Replayed:
        return cls(id=d["id"], status=d["status"])


@dataclass(frozen=True)
class EngagementRecorded:
    delivery_id: str
    event: str  # opened or clicked

    @classmethod
    def from_wire(cls, d: Json) -> EngagementRecorded:
        return cls(delivery_id=d["deliveryId"], event=d["event"])


# The event feed


@dataclass(frozen=True)
class Event:
    """One of tidings' own events (``delivery.sent``, ``delivery.failed``, …); ``id`` is
    its cursor."""

    id: str
    type: str
    timestamp: datetime
    data: Json

    @classmethod
    def from_wire(cls, d: Json) -> Event:
        return cls(id=d["id"], type=d["type"], timestamp=_at(d["timestamp"]), data=d["data"])


@dataclass(frozen=True)
class EventPage:
    """Events oldest first; pass ``next`` as ``after`` (it is the cursor to keep even when
    ``events`` is empty); ``more`` says whether another page is ready now."""

    events: tuple[Event, ...]
    next: str | None
    more: bool

    @classmethod
    def from_wire(cls, d: Json) -> EventPage:
        events = tuple(Event.from_wire(e) for e in d["events"])
        return cls(events, d.get("next"), bool(d.get("more", False)))


# Webhook endpoints


@dataclass(frozen=True)
class WebhookEndpoint:
    """A producer's URL that tidings posts its events to; ``secret`` only in the answer
    to its creation."""

    id: str
    url: str
    events: tuple[str, ...]
    types: tuple[str, ...] | None
    status: str  # active or disabled
    disabled_reason: str | None
    created_at: datetime
    secret: str | None = None

    @classmethod
    def from_wire(cls, d: Json) -> WebhookEndpoint:
        types = d.get("types")
        return cls(
            id=d["id"],
            url=d["url"],
            events=tuple(d["events"]),
            types=None if types is None else tuple(types),
            status=d["status"],
            disabled_reason=d.get("disabledReason"),
            created_at=_at(d["createdAt"]),
            secret=d.get("secret"),
        )


@dataclass(frozen=True)
class SecretRotated:
    """The new signing secret; the previous one still signs until ``previous_valid_until``."""

    secret: str
    previous_valid_until: datetime

    @classmethod
    def from_wire(cls, d: Json) -> SecretRotated:
        return cls(secret=d["secret"], previous_valid_until=_at(d["previousValidUntil"]))


@dataclass(frozen=True)
class WebhookAttempt:
    webhook_id: str
    type: str
    status: str
    attempts: int
    last_status: int | None
    last_error: str | None
    created_at: datetime
    sent_at: datetime | None
    next_attempt_at: datetime | None

    @classmethod
    def from_wire(cls, d: Json) -> WebhookAttempt:
        return cls(
            webhook_id=d["webhookId"],
            type=d["type"],
            status=d["status"],
            attempts=d["attempts"],
            last_status=d.get("lastStatus"),
            last_error=d.get("lastError"),
            created_at=_at(d["createdAt"]),
            sent_at=_maybe_at(d.get("sentAt")),
            next_attempt_at=_maybe_at(d.get("nextAttemptAt")),
        )
