"""Checking a campaign request against the registry and storing it, idempotently."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any

from tidings.campaigns.errors import CampaignError
from tidings.content.catalog import TemplateCatalog
from tidings.content.locales import fallback_chain
from tidings.ids import new_id
from tidings.priorities import CHAT_CHANNELS, Channel, Priority
from tidings.store import audiences
from tidings.store import campaigns as store
from tidings.store.campaigns import Campaign, CampaignStatus
from tidings.store.engine import Database
from tidings.store.types import NotificationType, TypeCatalog

# Campaigns reach users at their own addresses; a webhook URL belongs to a producer.
CAMPAIGN_CHANNELS = (
    Channel.EMAIL.value,
    Channel.SMS.value,
    Channel.PUSH.value,
    *(channel.value for channel in CHAT_CHANNELS),
)


@dataclass(frozen=True)
class CampaignRequest:
    """A campaign as the API took it (shapes and bounds checked there)."""

    type: str
    audience: Mapping[str, Any]  # normalised: topic, userIds or segment
    name: str | None = None
    data: dict[str, Any] = field(default_factory=dict)
    channels: Sequence[str] | None = None
    priority: str | None = None
    send_at: datetime | None = None
    spread_seconds: int = 0
    local_time: str | None = None
    timezone: str | None = None

    def digest(self) -> str:
        text = json.dumps(asdict(self), sort_keys=True, default=str, ensure_ascii=False)
        return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class Registry:
    """What a request is checked against."""

    db: Database
    types: TypeCatalog
    templates: TemplateCatalog
    max_data_bytes: int = 32 * 1024
    send_at_tolerance: float = 60.0


async def checked_row(
    registry: Registry, request: CampaignRequest, namespace: str, key: str, now: datetime
) -> dict[str, Any]:
    """The campaign row to store, or ``CampaignError`` naming the field."""
    kind = (await registry.types.get({request.type})).get(request.type)
    if kind is None:
        raise CampaignError(
            "unknown_type", f"notification type {request.type!r} is not registered", "type"
        )
    channels = _channels(request, kind)
    await _check_templates(registry.templates, kind, channels)
    _check_data(request, registry.max_data_bytes)
    await _check_audience(registry.db, request.audience)
    return {
        "id": new_id(),
        "namespace": namespace,
        "idempotency_key": key,
        "request_hash": request.digest(),
        "name": request.name,
        "type": kind.name,
        "category": kind.category,
        "priority": _priority(request, kind).value,
        "audience": dict(request.audience),
        "data": request.data,
        "channels": channels,
        "send_at": _send_at(request, now, registry.send_at_tolerance),
        "spread_seconds": request.spread_seconds,
        "local_time": request.local_time,
        "timezone": request.timezone,
        "status": CampaignStatus.SCHEDULED.value,
        "audience_size": None,
        "cursor": None,
        "expanded": 0,
        "deliveries": 0,
        "created_at": now,
        "updated_at": now,
    }


async def create(
    registry: Registry, request: CampaignRequest, namespace: str, key: str, now: datetime
) -> tuple[Campaign, bool]:
    """Store the campaign (SCHEDULED); a key used before answers the stored campaign, or a
    409 when it came with a different request."""
    row = await checked_row(registry, request, namespace, key, now)
    stored, created = await store.create(registry.db, row)
    if not created and stored.request_hash != row["request_hash"]:
        raise CampaignError(
            "idempotency_key_reused",
            f"Idempotency-Key {key!r} was already used with a different campaign "
            f"({stored.id}); use a new key for a new campaign",
            "Idempotency-Key",
            status_code=409,
        )
    return stored, created


def _channels(request: CampaignRequest, kind: NotificationType) -> list[str]:
    if request.channels is None:
        chosen = [c for c in kind.channels if c in CAMPAIGN_CHANNELS]
        if not chosen:
            raise CampaignError(
                "channel_not_allowed",
                f"type {kind.name!r} sends on no channel a campaign can use "
                f"({', '.join(CAMPAIGN_CHANNELS)})",
                "type",
            )
        return chosen
    for channel in request.channels:
        if channel not in CAMPAIGN_CHANNELS:
            raise CampaignError(
                "channel_not_allowed",
                f"a campaign sends to users' own addresses: {', '.join(CAMPAIGN_CHANNELS)}",
                "channels",
            )
        if channel not in kind.channels:
            raise CampaignError(
                "channel_not_allowed",
                f"type {kind.name!r} does not send on {channel}; it allows "
                f"{', '.join(kind.channels)}",
                "channels",
            )
    return list(dict.fromkeys(request.channels))


def _priority(request: CampaignRequest, kind: NotificationType) -> Priority:
    """LOW unless the request asks for more, and never above the type's own priority."""
    if request.priority is None:
        return Priority.LOW
    wanted, ceiling = Priority(request.priority), Priority(kind.priority)
    if not wanted.at_most(ceiling):
        raise CampaignError(
            "priority_too_high",
            f"type {kind.name!r} allows priority {ceiling.value} at most",
            "priority",
        )
    return wanted


async def _check_templates(
    templates: TemplateCatalog, kind: NotificationType, channels: Sequence[str]
) -> None:
    """Every user's locale chain ends in the type's default locale and ``en``: a template
    there serves every user of the audience."""
    chain = fallback_chain(None, kind.default_locale)
    await templates.refresh_if_stale()
    if any(templates.find(kind.name, c, chain) is None for c in channels):
        await templates.reload()  # uploaded a moment ago, maybe through another process
    for channel in channels:
        if templates.find(kind.name, channel, chain) is None:
            raise CampaignError(
                "no_template",
                f"no template can serve channel '{channel}' of type {kind.name!r} for every "
                f"user (locales that must have one: {' or '.join(chain)})",
                "channels",
            )


def _check_data(request: CampaignRequest, limit: int) -> None:
    size = len(json.dumps(request.data, ensure_ascii=False).encode())
    if size > limit:
        raise CampaignError("data_too_large", f"data is {size} bytes; the limit is {limit}", "data")


async def _check_audience(db: Database, audience: Mapping[str, Any]) -> None:
    """A topic or segment that holds nobody is refused: one row read, not a count of a
    multi-million audience."""
    if "userIds" in audience or await audiences.page(db, audience, None, 1):
        return
    if "topic" in audience:
        raise CampaignError(
            "unknown_topic", f"nobody follows topic {audience['topic']!r}", "audience.topic"
        )
    raise CampaignError("empty_audience", "no user profile matches the segment", "audience.segment")


def _send_at(request: CampaignRequest, now: datetime, tolerance: float) -> datetime:
    if request.send_at is None:
        return now
    if request.send_at < now - timedelta(seconds=tolerance):
        raise CampaignError("send_at_in_past", "sendAt is in the past", "sendAt")
    return max(request.send_at, now)
