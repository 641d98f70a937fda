"""What the API answers about the people tidings reaches: devices, topics, suppressions,
inbox tokens and inbound replies (frozen dataclasses read from camelCase JSON)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from .results import Json, _at


@dataclass(frozen=True)
class Device:
    """A push token of a user; ``active`` turns false when a provider says it is gone."""

    user_id: str
    platform: str  # ios, android, web
    token: str
    active: bool
    deactivated_reason: str | None
    created_at: datetime
    updated_at: datetime

    @classmethod
    def from_wire(cls, d: Json) -> Device:
        return cls(
            user_id=d["userId"],
            platform=d["platform"],
            token=d["token"],
            active=d["active"],
            deactivated_reason=d.get("deactivatedReason"),
            created_at=_at(d["createdAt"]),
            updated_at=_at(d["updatedAt"]),
        )


@dataclass(frozen=True)
class SubscribersAdded:
    """``added`` users were new to the topic, which now has ``subscribers``."""

    topic: str
    added: int
    subscribers: int

    @classmethod
    def from_wire(cls, d: Json) -> SubscribersAdded:
        return cls(topic=d["topic"], added=d["added"], subscribers=d["subscribers"])


@dataclass(frozen=True)
class Topic:
    topic: str
    subscribers: int

    @classmethod
    def from_wire(cls, d: Json) -> Topic:
        return cls(topic=d["topic"], subscribers=d["subscribers"])


@dataclass(frozen=True)
class Suppression:
    """An address no notification of its channel is sent to (``address`` as the server
    stores it: canonical, or a hash once its user was erased)."""

    channel: str
    address: str
    reason: str
    created_at: datetime

    @classmethod
    def from_wire(cls, d: Json) -> Suppression:
        return cls(d["channel"], d["address"], d["reason"], _at(d["createdAt"]))


@dataclass(frozen=True)
class InboxToken:
    """A signed token that lets a browser read one user's inbox until ``expires_at``."""

    token: str
    user_id: str
    expires_at: datetime

    @classmethod
    def from_wire(cls, d: Json) -> InboxToken:
        return cls(token=d["token"], user_id=d["userId"], expires_at=_at(d["expiresAt"]))


@dataclass(frozen=True)
class InboundReply:
    """An SMS or WhatsApp reply, with the opt-out or opt-in keyword it carried, if any."""

    account: str
    sender: str
    keyword: str | None
    action: str
    at: datetime

    @classmethod
    def from_wire(cls, d: Json) -> InboundReply:
        return cls(d["account"], d["sender"], d.get("keyword"), d["action"], _at(d["at"]))
