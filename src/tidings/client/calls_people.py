"""The calls about the people tidings reaches, described once as in ``calls.py``: devices,
topics, suppressions, inbox tokens and inbound replies."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from .calls import Call, Params, nothing, reading, reading_list, segment
from .inputs import Channel, compact
from .results_people import (
    Device,
    InboundReply,
    InboxToken,
    SubscribersAdded,
    Suppression,
    Topic,
)

Platform = Literal["ios", "android", "web"]

# Devices


def register_device(user_id: str, platform: Platform, token: str) -> Call[Device]:
    body = {"userId": user_id, "platform": platform, "token": token}
    return Call("POST", "/v1/devices", reading(Device.from_wire), body)


def get_device(token: str) -> Call[Device]:
    return Call("GET", f"/v1/devices/{segment(token)}", reading(Device.from_wire))


def delete_device(token: str) -> Call[None]:
    return Call("DELETE", f"/v1/devices/{segment(token)}", nothing)


def list_devices(user_id: str) -> Call[list[Device]]:
    path = f"/v1/users/{segment(user_id)}/devices"
    return Call("GET", path, reading_list(Device.from_wire))


# Topics


def subscribe(topic: str, user_ids: Iterable[str]) -> Call[SubscribersAdded]:
    path = f"/v1/topics/{segment(topic)}/subscribers"
    return Call("PUT", path, reading(SubscribersAdded.from_wire), {"userIds": list(user_ids)})


def unsubscribe(topic: str, user_id: str) -> Call[None]:
    path = f"/v1/topics/{segment(topic)}/subscribers/{segment(user_id)}"
    return Call("DELETE", path, nothing)


def get_topic(topic: str) -> Call[Topic]:
    return Call("GET", f"/v1/topics/{segment(topic)}", reading(Topic.from_wire))


def user_topics(user_id: str) -> Call[list[str]]:
    path = f"/v1/users/{segment(user_id)}/topics"
    return Call("GET", path, reading(lambda d: [str(t) for t in d["topics"]]))


# Suppressions


def _suppression_path(channel: Channel, address: str) -> str:
    return f"/v1/suppressions/{segment(channel)}/{segment(address)}"


def suppress(channel: Channel, address: str, reason: str | None) -> Call[Suppression]:
    body = compact({"reason": reason})
    return Call("PUT", _suppression_path(channel, address), reading(Suppression.from_wire), body)


def get_suppression(channel: Channel, address: str) -> Call[Suppression]:
    return Call("GET", _suppression_path(channel, address), reading(Suppression.from_wire))


def unsuppress(channel: Channel, address: str) -> Call[None]:
    return Call("DELETE", _suppression_path(channel, address), nothing)


def inbound_replies(keyword: str | None, limit: int) -> Call[list[InboundReply]]:
    params: Params = compact({"keyword": keyword, "limit": limit})
    read = reading_list(InboundReply.from_wire)
    return Call("GET", "/v1/inbound-replies", read, params=params)


# Inbox


def inbox_token(user_id: str) -> Call[InboxToken]:
    path = f"/v1/users/{segment(user_id)}/inbox-token"
    return Call("POST", path, reading(InboxToken.from_wire))
