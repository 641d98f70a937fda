"""Turning a validated request into a notification draft: checks against its type, and one
delivery per channel and address (docs/architecture.md, Policy check order;
preferences come in a later step)."""

from __future__ import annotations

import hashlib
import json
import random
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from tidings.ids import delivery_ids, new_id
from tidings.intake.requests import MAX_JSON_DEPTH, NotificationIn, json_depth_over
from tidings.priorities import CHAT_CHANNELS, Category, Channel, Priority
from tidings.refusal import Refusal
from tidings.states import Status
from tidings.store.intake import DeliveryDraft, NotificationDraft
from tidings.store.types import NotificationType
from tidings.store.users import UserProfile


class ItemError(Refusal):
    """Why one notification was refused: becomes a 4xx (or a batch item's error)."""


@dataclass(frozen=True)
class IntakeContext:
    """What the drafts need from the registry, read once per request or batch."""

    now: datetime
    types: dict[str, NotificationType]
    users: dict[str, UserProfile]
    device_tokens: dict[str, list[str]] = field(default_factory=dict)
    max_data_bytes: int = 32 * 1024
    send_at_tolerance: float = 60.0
    # Scheduled LOW and NORMAL sends are due at a random instant this many seconds after
    # their sendAt, so that 60,000 reminders "at 18:00" are not claimed as one wall.
    due_spread_seconds: float = 0.0


def canonical_data(item: NotificationIn) -> str:
    """``data`` as JSON with sorted keys: what is stored, hashed and size-checked."""
    try:
        return json.dumps(
            item.data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        )
    except ValueError:  # Python's parser accepts NaN and Infinity; no database JSON type does
        raise ItemError(
            "invalid_data", "NaN and Infinity are not valid JSON numbers", "data"
        ) from None


def request_hash(item: NotificationIn, data_json: str) -> str:
    """A digest of the request as understood, so whitespace and key order do not matter."""
    envelope = item.model_dump_json(exclude={"idempotency_key", "data"}, exclude_none=True)
    return hashlib.sha256(f"{envelope}\n{data_json}".encode()).hexdigest()


def build_draft(
    item: NotificationIn, key: str, namespace: str, context: IntakeContext
) -> NotificationDraft:
    """The draft for one request, or raise ``ItemError`` naming the offending field."""
    kind = context.types.get(item.type)
    if kind is None:
        raise ItemError(
            "unknown_type", f"notification type {item.type!r} is not registered", "type"
        )
    priority = _priority(item, kind)
    data_json = canonical_data(item)
    _check_data(item, data_json, context.max_data_bytes)
    send_at = _send_at(item, context)
    notification_id = new_id()
    deliveries = _deliveries(item, kind, context, delivery_ids(notification_id))
    email = _email_options(item, kind, deliveries)
    due_at = _due_at(send_at, priority, context.due_spread_seconds)
    return NotificationDraft(
        id=notification_id,
        namespace=namespace,
        idempotency_key=key,
        request_hash=request_hash(item, data_json),
        type=item.type,
        category=kind.category,
        priority=priority,
        user_id=item.user_id,
        data=item.data,
        data_json=data_json,
        locale=item.locale or _profile_locale(item, context),
        send_at=send_at,
        due_at=due_at,
        deliveries=deliveries,
        email=email,
    )


def _email_options(
    item: NotificationIn, kind: NotificationType, deliveries: Sequence[DeliveryDraft]
) -> dict[str, Any] | None:
    """The notification's email details, refused where they cannot apply."""
    if item.email is None:
        return None
    if not any(d.channel == Channel.EMAIL.value for d in deliveries):
        raise ItemError(
            "invalid_request", "email details given, but this notification sends no email", "email"
        )
    if (item.email.cc or item.email.bcc) and kind.category == Category.MARKETING.value:
        # A copy would reach someone who never subscribed and has no way to unsubscribe.
        field = "email.cc" if item.email.cc else "email.bcc"
        raise ItemError("invalid_request", "marketing email cannot have copies", field)
    return item.email.model_dump(by_alias=True, exclude_none=True) or None


def _priority(item: NotificationIn, kind: NotificationType) -> Priority:
    ceiling = Priority(kind.priority)
    if item.priority is None:
        return ceiling
    if isinstance(item.priority, Category):
        # A category named as a priority is a producer's statement of what it sends: it
        # must be true, and the type still decides the priority (a category raises none).
        if item.priority.value != kind.category:
            raise ItemError(
                "priority_category_mismatch",
                f"priority {item.priority.value!r} names a category, but type {item.type!r} "
                f"is {kind.category}; name its category or a priority (high, normal, low)",
                "priority",
            )
        return ceiling
    if not item.priority.at_most(ceiling):
        raise ItemError(
            "priority_too_high",
            f"type {item.type!r} allows priority {ceiling.value} at most; a producer may "
            f"lower a type's priority, never raise it",
            "priority",
        )
    return item.priority


def _check_data(item: NotificationIn, data_json: str, limit: int) -> None:
    """What the database cannot store is refused here, not by a failed group commit (the API
    refuses NUL and lone surrogates in any body first; this holds for any caller)."""
    try:
        size = len(data_json.encode())
    except UnicodeEncodeError:
        raise ItemError("invalid_text", "data contains a lone UTF-16 surrogate", "data") from None
    if size > limit:
        raise ItemError("data_too_large", f"data is {size} bytes; the limit is {limit}", "data")
    # Both tests run only when the cheap look at the text says they might fail.
    if "\\u0000" in data_json and _has_nul(item.data):
        raise ItemError("invalid_text", "data contains a NUL character", "data")
    brackets = data_json.count("{") + data_json.count("[")
    if brackets > MAX_JSON_DEPTH and json_depth_over(item.data):
        raise ItemError(
            "invalid_data", f"data is nested deeper than {MAX_JSON_DEPTH} levels", "data"
        )


def _has_nul(value: Any) -> bool:
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, str) and "\x00" in node:
            return True
        if isinstance(node, dict):
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


def _send_at(item: NotificationIn, context: IntakeContext) -> datetime | None:
    if item.send_at is None:
        return None
    if item.send_at < context.now - timedelta(seconds=context.send_at_tolerance):
        raise ItemError("send_at_in_past", "sendAt is in the past", "sendAt")
    # A sendAt within the tolerance is "now": it is sent at once (and wakes HIGH workers).
    return item.send_at if item.send_at > context.now else None


def _due_at(send_at: datetime | None, priority: Priority, window: float) -> datetime | None:
    """When a scheduled send is first due: a one-time password is never held back."""
    if send_at is None or priority is Priority.HIGH or window <= 0:
        return None
    return send_at + timedelta(seconds=random.uniform(0, window))


def _profile(item: NotificationIn, context: IntakeContext) -> UserProfile | None:
    return context.users.get(item.user_id) if item.user_id else None


def _profile_locale(item: NotificationIn, context: IntakeContext) -> str | None:
    profile = _profile(item, context)
    return profile.locale if profile else None


def _addresses(item: NotificationIn, channel: Channel, context: IntakeContext) -> list[str]:
    to = item.to
    if channel is Channel.EMAIL:
        profile = _profile(item, context)
        email = (to.email if to else None) or (profile.email if profile else None)
        return [email] if email else []
    if channel is Channel.SMS:
        profile = _profile(item, context)
        phone = (to.phone if to else None) or (profile.phone if profile else None)
        return [phone] if phone else []
    if channel is Channel.WEBHOOK:
        return [to.webhook_url] if to and to.webhook_url else []
    if channel in CHAT_CHANNELS:
        profile = _profile(item, context)
        given: str | None = getattr(to, channel.value) if to else None
        address = given or (profile.address(channel.value) if profile else None)
        return [address] if address else []
    if channel is Channel.INBOX:
        # The feed is a registered user's: its address is the user id (docs/inbox.md).
        return [item.user_id] if item.user_id and _profile(item, context) else []
    if to and to.device_tokens:
        return list(dict.fromkeys(to.device_tokens))
    return context.device_tokens.get(item.user_id, []) if item.user_id else []


_ADDRESS_FIELD = {
    Channel.EMAIL: "to.email",
    Channel.SMS: "to.phone",
    Channel.PUSH: "to.deviceTokens",
    Channel.WEBHOOK: "to.webhookUrl",
    **{channel: f"to.{channel.value}" for channel in CHAT_CHANNELS},
    Channel.INBOX: "userId",
}


def _deliveries(
    item: NotificationIn, kind: NotificationType, context: IntakeContext, ids: Iterator[uuid.UUID]
) -> list[DeliveryDraft]:
    """One draft per channel and address; ``ids`` are the notification's delivery ids."""
    allowed = [Channel(c) for c in kind.channels]
    explicit = item.channels is not None
    channels = list(dict.fromkeys(item.channels)) if item.channels else allowed
    drafts: list[DeliveryDraft] = []
    for channel in channels:
        if channel not in allowed:
            raise ItemError(
                "channel_not_allowed",
                f"type {item.type!r} does not send on {channel.value}; it allows "
                f"{', '.join(c.value for c in allowed)}",
                "channels",
            )
        addresses = _addresses(item, channel, context)
        if not addresses and explicit:
            _refuse_unknown_user(item, context)
            raise ItemError(
                "no_address",
                f"no {channel.value} address for this recipient: "
                f"give {_ADDRESS_FIELD[channel]} or a userId that has one",
                _ADDRESS_FIELD[channel],
            )
        if not addresses:
            drafts.append(DeliveryDraft(next(ids), channel, "", Status.SKIPPED, "no_address"))
        drafts.extend(DeliveryDraft(next(ids), channel, address) for address in addresses)
    if all(d.status is Status.SKIPPED for d in drafts):
        _refuse_unknown_user(item, context)
        raise ItemError(
            "no_address",
            "the recipient has no address on any channel of this type: "
            "give `to` or a userId with a profile",
            "to",
        )
    return drafts


def _refuse_unknown_user(item: NotificationIn, context: IntakeContext) -> None:
    """No address because the user is not registered: the producer must register the user
    (PUT /v1/users/{id}) or give `to`, which is not what ``no_address`` asks of it."""
    known = item.user_id in context.users or item.user_id in context.device_tokens
    if item.user_id and not known:
        raise ItemError(
            "unknown_user",
            f"user {item.user_id!r} is not registered (PUT /v1/users/{{id}}); "
            "register the user or give the address in `to`",
            "userId",
        )


def user_ids(items: Sequence[NotificationIn]) -> set[str]:
    return {item.user_id for item in items if item.user_id}


def needs_devices(item: NotificationIn, kind: NotificationType | None) -> bool:
    channels = item.channels or (kind.channels if kind else [])
    return Channel.PUSH in channels and not (item.to and item.to.device_tokens)
