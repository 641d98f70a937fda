"""Every API call, described once: method, path, body, key, and how to read the answer.

``Client`` and ``AsyncClient`` only run these descriptions (``sync_client.py``,
``async_client.py``), so a route's request and its parsing exist in one place for both.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx

from .errors import UnexpectedAnswer, error_from
from .inputs import (
    KEEP,
    Category,
    Channel,
    Keep,
    NewCampaign,
    Notification,
    Profile,
    QuietHours,
    TypeDefinition,
    compact,
)
from .results import (
    Accepted,
    BatchItem,
    BatchResult,
    Campaign,
    CampaignAccepted,
    CampaignPage,
    CancelResult,
    ChannelPreview,
    DryRun,
    Erased,
    NotificationPage,
    NotificationStatus,
    NotificationType,
    Preferences,
    Template,
    TemplateUpload,
    User,
    UserPage,
    UsersImported,
)
from .retrying import retry_after

T = TypeVar("T")
# A list value is sent as the parameter repeated (``?kind=transient&kind=poison``).
Params = Mapping[str, str | int | list[str]]


@dataclass(frozen=True)
class Call(Generic[T]):
    method: str
    path: str
    read: Callable[[httpx.Response], T]
    body: Any = None
    params: Params | None = None
    idempotency_key: str | None = None


def finish(call: Call[T], response: httpx.Response) -> T:
    """The call's result from a final answer; the matching TidingsError for any other."""
    if not response.is_success:
        raise error_from(response, call.idempotency_key, retry_after(response))
    try:
        return call.read(response)
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as error:
        raise UnexpectedAnswer(
            f"cannot read the answer to {call.method} {call.path}: {error!r}",
            status_code=response.status_code,
            idempotency_key=call.idempotency_key,
        ) from error


def segment(value: str) -> str:
    """A path segment: every reserved character quoted (an address's ``/`` and ``@`` too)."""
    return quote(value, safe="")


def _json(response: httpx.Response) -> Any:
    return response.json()


def reading(parse: Callable[[Any], T]) -> Callable[[httpx.Response], T]:
    """Reads an answer whose whole JSON body is one result."""
    return lambda response: parse(response.json())


def reading_list(parse: Callable[[Any], T]) -> Callable[[httpx.Response], list[T]]:
    """Reads an answer whose body is a JSON array of results."""
    return lambda response: [parse(item) for item in response.json()]


def nothing(response: httpx.Response) -> None:
    """A 204's (empty) answer."""


# Notifications


def send(notification: Notification) -> Call[Accepted]:
    key = notification.key()

    def read(response: httpx.Response) -> Accepted:
        replayed = response.headers.get("Idempotent-Replayed", "").lower() == "true"
        return Accepted.from_wire(_json(response), key, replayed)

    return Call("POST", "/v1/notifications", read, notification.wire(), idempotency_key=key)


def send_batch(notifications: Sequence[Notification]) -> Call[BatchResult]:
    keys = [n.key() for n in notifications]  # every key, before anything is sent
    items = [
        {**n.wire(), "idempotencyKey": key} for n, key in zip(notifications, keys, strict=True)
    ]

    def read(response: httpx.Response) -> BatchResult:
        results = _json(response)["results"]
        return BatchResult(tuple(BatchItem.from_wire(r, keys[r["index"]]) for r in results))

    return Call("POST", "/v1/notifications/batch", read, {"notifications": items})


def get_notification(notification_id: str) -> Call[NotificationStatus]:
    path = f"/v1/notifications/{segment(notification_id)}"
    return Call("GET", path, reading(NotificationStatus.from_wire))


def search_notifications(
    *,
    user_id: str | None = None,
    type: str | None = None,
    status: str | None = None,
    channel: str | None = None,
    campaign_id: str | None = None,
    address: str | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
    limit: int = 50,
    after: str | None = None,
) -> Call[NotificationPage]:
    given = {
        "userId": user_id,
        "type": type,
        "status": status,
        "channel": channel,
        "campaignId": campaign_id,
        "address": address,
        "from": start.isoformat() if start else None,
        "to": end.isoformat() if end else None,
        "limit": limit,
        "after": after,
    }
    params: dict[str, str | int] = compact(given)
    return Call("GET", "/v1/notifications", reading(NotificationPage.from_wire), params=params)


# Campaigns


def create_campaign(campaign: NewCampaign) -> Call[CampaignAccepted]:
    key = campaign.key()

    def read(response: httpx.Response) -> CampaignAccepted:
        return CampaignAccepted.from_wire(_json(response), key)

    return Call("POST", "/v1/campaigns", read, campaign.wire(), idempotency_key=key)


def dry_run_campaign(campaign: NewCampaign) -> Call[DryRun]:
    # Nothing is stored, so no key is needed; one given is sent all the same.
    key = campaign.idempotency_key
    if key is None and campaign.business_id is not None:
        key = campaign.key()
    read = reading(DryRun.from_wire)
    return Call("POST", "/v1/campaigns", read, campaign.wire(), {"dryRun": "true"}, key)


def get_campaign(campaign_id: str) -> Call[Campaign]:
    path = f"/v1/campaigns/{segment(campaign_id)}"
    return Call("GET", path, reading(Campaign.from_wire))


def list_campaigns(limit: int = 50, after: str | None = None) -> Call[CampaignPage]:
    params: dict[str, str | int] = compact({"limit": limit, "after": after})
    return Call("GET", "/v1/campaigns", reading(CampaignPage.from_wire), params=params)


def cancel_campaign(campaign_id: str) -> Call[CancelResult]:
    path = f"/v1/campaigns/{segment(campaign_id)}/cancel"
    return Call("POST", path, reading(CancelResult.from_wire))


# Preferences


def get_preferences(user_id: str) -> Call[Preferences]:
    path = f"/v1/users/{segment(user_id)}/preferences"
    return Call("GET", path, reading(Preferences.from_wire))


def set_preferences(
    user_id: str,
    categories: Mapping[Category, Mapping[Channel, bool]],
    quiet_hours: QuietHours | Keep | None,
    timezone: str | Keep | None,
    locale: str | Keep | None,
) -> Call[Preferences]:
    body: dict[str, Any] = {"categories": {c: dict(v) for c, v in categories.items()}}
    if quiet_hours is not KEEP:
        body["quietHours"] = quiet_hours.wire() if quiet_hours is not None else None
    body |= {name: v for name, v in (("timezone", timezone), ("locale", locale)) if v is not KEEP}
    path = f"/v1/users/{segment(user_id)}/preferences"
    return Call("PUT", path, reading(Preferences.from_wire), body)


# Templates


def _template_path(type_name: str, channel: str, locale: str) -> str:
    return f"/v1/templates/{segment(type_name)}/{segment(channel)}/{segment(locale)}"


def put_template(
    type_name: str, channel: Channel, locale: str, parts: Mapping[str, Any]
) -> Call[TemplateUpload]:
    def read(response: httpx.Response) -> TemplateUpload:
        template = Template.from_wire(_json(response))
        return TemplateUpload(template, created=response.status_code == 201)

    return Call("PUT", _template_path(type_name, channel, locale), read, compact(parts))


def template_versions(type_name: str, channel: Channel, locale: str) -> Call[list[Template]]:
    def read(response: httpx.Response) -> list[Template]:
        return [Template.from_wire(t) for t in _json(response)["versions"]]

    return Call("GET", _template_path(type_name, channel, locale), read)


def list_templates(type_name: str) -> Call[list[Template]]:
    def read(response: httpx.Response) -> list[Template]:
        return [Template.from_wire(t) for t in _json(response)["templates"]]

    return Call("GET", f"/v1/templates/{segment(type_name)}", read)


def preview(
    type_name: str,
    user_id: str | None,
    locale: str | None,
    data: Mapping[str, Any] | None,
    channels: Iterable[Channel] | None,
) -> Call[dict[str, ChannelPreview]]:
    def read(response: httpx.Response) -> dict[str, ChannelPreview]:
        shown = _json(response)["channels"]
        return {name: ChannelPreview.from_wire(c) for name, c in shown.items()}

    body = compact(
        {
            "type": type_name,
            "userId": user_id,
            "locale": locale,
            "data": None if data is None else dict(data),
            "channels": None if channels is None else list(channels),
        }
    )
    return Call("POST", "/v1/templates/preview", read, body)


# Types and users


def put_type(name: str, definition: TypeDefinition) -> Call[NotificationType]:
    path = f"/v1/types/{segment(name)}"
    return Call("PUT", path, reading(NotificationType.from_wire), definition.wire())


def get_type(name: str) -> Call[NotificationType]:
    path = f"/v1/types/{segment(name)}"
    return Call("GET", path, reading(NotificationType.from_wire))


def put_user(user_id: str, profile: Profile) -> Call[User]:
    path = f"/v1/users/{segment(user_id)}"
    return Call("PUT", path, reading(User.from_wire), profile.wire())


def get_user(user_id: str) -> Call[User]:
    path = f"/v1/users/{segment(user_id)}"
    return Call("GET", path, reading(User.from_wire))


def list_users(
    *,
    id_prefix: str | None = None,
    attribute: str | None = None,
    equals: str | None = None,
    limit: int = 50,
    after: str | None = None,
) -> Call[UserPage]:
    given = {"idPrefix": id_prefix, "attribute": attribute, "equals": equals}
    params: dict[str, str | int] = compact({**given, "limit": limit, "after": after})
    return Call("GET", "/v1/users", reading(UserPage.from_wire), params=params)


def put_users(users: Sequence[tuple[str, Profile]]) -> Call[UsersImported]:
    body = {"users": [{"id": user_id, **profile.wire()} for user_id, profile in users]}
    return Call("POST", "/v1/users/batch", reading(UsersImported.from_wire), body)


def erase_user(user_id: str) -> Call[Erased]:
    path = f"/v1/users/{segment(user_id)}"
    return Call("DELETE", path, reading(Erased.from_wire))
