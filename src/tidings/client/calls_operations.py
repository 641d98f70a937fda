"""The operators' calls, described once as in ``calls.py``: workflow cancel and engagement,
dead letters, the event feed, webhook endpoints, reports, campaign resume, providers."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date, datetime
from typing import Any, Literal

from .calls import Call, Params, nothing, reading, reading_list, segment
from .inputs import compact
from .results import Campaign
from .results_operations import (
    BulkReplayed,
    DeadLetter,
    EngagementRecorded,
    EventPage,
    Replayed,
    SecretRotated,
    WebhookAttempt,
    WebhookEndpoint,
)
from .results_reports import GuardReset, Providers, Report

FailureKind = Literal["transient", "permanent", "poison", "exhausted", "ambiguous"]


def _listed(values: Iterable[str] | None) -> list[str] | None:
    return None if values is None else list(values)


def _moment(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


# Workflows


def cancel_notifications(cancel_key: str) -> Call[int]:
    read = reading(lambda d: int(d["cancelled"]))
    return Call("POST", "/v1/notifications/cancel", read, {"cancelKey": cancel_key})


def record_engagement(
    delivery_id: str, event: Literal["opened", "clicked"]
) -> Call[EngagementRecorded]:
    path = f"/v1/deliveries/{segment(delivery_id)}/engagement"
    return Call("POST", path, reading(EngagementRecorded.from_wire), {"event": event})


# Dead letters


def _dead_filter(
    kinds: Iterable[FailureKind] | None,
    type_name: str | None,
    error: str | None,
    start: datetime | None,
    end: datetime | None,
) -> dict[str, Any]:
    found = {"kind": _listed(kinds), "type": type_name, "error": error}
    return compact({**found, "from": _moment(start), "to": _moment(end)})


def dead_letters(
    kinds: Iterable[FailureKind] | None,
    type_name: str | None,
    error: str | None,
    start: datetime | None,
    end: datetime | None,
    limit: int,
) -> Call[list[DeadLetter]]:
    params: Params = {**_dead_filter(kinds, type_name, error, start, end), "limit": limit}
    return Call("GET", "/v1/dead-letters", reading_list(DeadLetter.from_wire), params=params)


def replay_dead_letters(
    kinds: Iterable[FailureKind] | None,
    type_name: str | None,
    error: str | None,
    start: datetime | None,
    end: datetime | None,
    limit: int,
) -> Call[BulkReplayed]:
    body = {**_dead_filter(kinds, type_name, error, start, end), "limit": limit}
    return Call("POST", "/v1/dead-letters/replay", reading(BulkReplayed.from_wire), body)


def replay_delivery(delivery_id: str) -> Call[Replayed]:
    path = f"/v1/deliveries/{segment(delivery_id)}/replay"
    return Call("POST", path, reading(Replayed.from_wire))


# Events


def events(after: str | None, types: Iterable[str] | None, limit: int) -> Call[EventPage]:
    params: Params = compact({"after": after, "types": _listed(types), "limit": limit})
    return Call("GET", "/v1/events", reading(EventPage.from_wire), params=params)


# Webhook endpoints

_ENDPOINTS = "/v1/webhook-endpoints"


def create_webhook_endpoint(
    url: str, events: Iterable[str], types: Iterable[str] | None
) -> Call[WebhookEndpoint]:
    body = compact({"url": url, "events": list(events), "types": _listed(types)})
    return Call("POST", _ENDPOINTS, reading(WebhookEndpoint.from_wire), body)


def list_webhook_endpoints() -> Call[list[WebhookEndpoint]]:
    return Call("GET", _ENDPOINTS, reading_list(WebhookEndpoint.from_wire))


def get_webhook_endpoint(endpoint_id: str) -> Call[WebhookEndpoint]:
    path = f"{_ENDPOINTS}/{segment(endpoint_id)}"
    return Call("GET", path, reading(WebhookEndpoint.from_wire))


def delete_webhook_endpoint(endpoint_id: str) -> Call[None]:
    return Call("DELETE", f"{_ENDPOINTS}/{segment(endpoint_id)}", nothing)


def rotate_webhook_secret(endpoint_id: str) -> Call[SecretRotated]:
    path = f"{_ENDPOINTS}/{segment(endpoint_id)}/rotate-secret"
    return Call("POST", path, reading(SecretRotated.from_wire))


def enable_webhook_endpoint(endpoint_id: str) -> Call[WebhookEndpoint]:
    path = f"{_ENDPOINTS}/{segment(endpoint_id)}/enable"
    return Call("POST", path, reading(WebhookEndpoint.from_wire))


def webhook_attempts(endpoint_id: str, limit: int) -> Call[list[WebhookAttempt]]:
    path = f"{_ENDPOINTS}/{segment(endpoint_id)}/attempts"
    read = reading_list(WebhookAttempt.from_wire)
    return Call("GET", path, read, params={"limit": limit})


# Reports and campaigns


def campaign_report(campaign_id: str) -> Call[Report]:
    path = f"/v1/campaigns/{segment(campaign_id)}/report"
    return Call("GET", path, reading(Report.from_wire))


def type_report(type_name: str, start: date | None, end: date | None) -> Call[Report]:
    """``start`` and ``end`` are UTC days, both included (the server's ``from``/``to``)."""
    days = {"from": start.isoformat() if start else None, "to": end.isoformat() if end else None}
    params: Params = compact(days)
    path = f"/v1/types/{segment(type_name)}/report"
    return Call("GET", path, reading(Report.from_wire), params=params)


def resume_campaign(campaign_id: str) -> Call[Campaign]:
    path = f"/v1/campaigns/{segment(campaign_id)}/resume"
    return Call("POST", path, reading(Campaign.from_wire))


# Providers


def providers() -> Call[Providers]:
    return Call("GET", "/v1/providers", reading(Providers.from_wire))


def reset_deactivation_guard(account: str) -> Call[GuardReset]:
    path = f"/v1/providers/{segment(account)}/deactivation-guard/reset"
    return Call("POST", path, reading(GuardReset.from_wire))
