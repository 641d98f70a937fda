"""GET /v1/notifications: a namespace's notifications, newest first, found by user, type,
status, channel, campaign, address and time, paged by a stable cursor (issue 29)."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from fastapi import FastAPI

from tests.helpers import email_to, post, put_type
from tests.integration.test_api_keys import add_key, http
from tidings.api.app import create_app
from tidings.api.auth import ALL_SCOPES
from tidings.service import Service
from tidings.store.schema import delivery, notification


async def send(client: httpx.AsyncClient, body: dict[str, Any]) -> str:
    answer = await post(client, body)
    assert answer.status_code == 202, answer.text
    notification_id: str = answer.json()["id"]
    return notification_id


async def search(client: httpx.AsyncClient, **params: Any) -> dict[str, Any]:
    answer = await client.get("/v1/notifications", params=params)
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def ids(page: dict[str, Any]) -> list[str]:
    return [found["id"] for found in page["notifications"]]


async def test_pages_walk_every_notification_newest_first_once(
    client: httpx.AsyncClient,
) -> None:
    await put_type(client)
    sent = [await send(client, email_to(f"u{i}@example.com")) for i in range(7)]
    seen: list[str] = []
    page = await search(client, limit=3)
    while True:
        assert len(page["notifications"]) <= 3
        seen += ids(page)
        if page["next"] is None:
            break
        # Sent after the first page was read: newer, so never on a later (older) page.
        await send(client, email_to("late@example.com"))
        page = await search(client, limit=3, after=page["next"])
    assert seen == list(reversed(sent))


async def test_filters_on_the_notification_and_on_its_deliveries(
    client: httpx.AsyncClient, service: Service
) -> None:
    await put_type(client)
    await put_type(client, "password.reset", priority="high")
    ana = await send(client, email_to("ana@example.com", userId="ana"))
    bob_reset = await send(
        client, {**email_to("bob@example.com", userId="bob"), "type": "password.reset"}
    )
    sms = await send(
        client, {"type": "order.confirmed", "to": {"phone": "+15550001111"}, "channels": ["sms"]}
    )
    campaign_id = uuid.uuid4()
    async with service.db.engine.begin() as conn:
        await conn.execute(
            sa.update(notification)
            .where(notification.c.id == uuid.UUID(ana))
            .values(campaign_id=campaign_id)
        )
        await conn.execute(
            sa.update(delivery)
            .where(delivery.c.notification_id == uuid.UUID(sms))
            .values(status="FAILED", failure_kind="permanent")
        )

    assert ids(await search(client, userId="ana")) == [ana]
    assert ids(await search(client, type="password.reset")) == [bob_reset]
    assert ids(await search(client, channel="sms")) == [sms]
    assert ids(await search(client, status="FAILED")) == [sms]
    assert ids(await search(client, status="FAILED", channel="email")) == []
    assert ids(await search(client, campaignId=str(campaign_id))) == [ana]
    assert ids(await search(client, campaignId=str(uuid.uuid4()))) == []
    assert ids(await search(client, userId="bob", type="order.confirmed")) == []
    found = (await search(client, userId="bob"))["notifications"][0]
    assert (found["type"], found["priority"], found["userId"]) == ("password.reset", "high", "bob")
    assert [(d["channel"], d["status"]) for d in found["deliveries"]] == [("email", "PENDING")]


async def test_an_address_is_matched_exactly_and_never_shown(client: httpx.AsyncClient) -> None:
    await put_type(client)
    ana = await send(client, email_to("ana@example.com"))
    await send(client, email_to("anabel@example.com"))
    answer = await client.get("/v1/notifications", params={"address": "ana@example.com"})
    assert ids(answer.json()) == [ana]
    assert "ana@example.com" not in answer.text
    assert answer.json()["notifications"][0]["deliveries"][0]["address"] == "a***@example.com"
    assert ids(await search(client, address="ana@example")) == []
    too_long = "a" * 2049
    refused = await client.get("/v1/notifications", params={"address": too_long})
    assert refused.status_code == 422 and refused.json()["error"]["field"] == "address"
    assert too_long not in refused.text


async def test_a_time_range_keeps_from_and_leaves_out_to(client: httpx.AsyncClient) -> None:
    await put_type(client)
    first = await send(client, email_to())
    await asyncio.sleep(0.01)
    middle = datetime.now(UTC)
    await asyncio.sleep(0.01)
    second = await send(client, email_to())
    assert ids(await search(client, **{"from": middle.isoformat()})) == [second]
    assert ids(await search(client, to=middle.isoformat())) == [first]
    later = middle + timedelta(hours=1)
    assert ids(await search(client, **{"from": later.isoformat()})) == []
    assert ids(await search(client, **{"from": "1960-01-01T00:00:00Z"})) == [second, first]


async def test_a_namespace_finds_only_its_own(service: Service) -> None:
    app: FastAPI = create_app(service)
    own = await add_key(app, "a", ALL_SCOPES, namespace="a")
    other = await add_key(app, "b", ALL_SCOPES, namespace="b")
    async with http(app, own) as a, http(app, other) as b:
        await put_type(a)
        await put_type(b)
        mine = await send(a, email_to(userId="ana"))
        assert ids(await search(a, userId="ana")) == [mine]
        assert ids(await search(b, userId="ana")) == []
        assert ids(await search(b)) == []


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"limit": 0}, "limit"),
        ({"limit": 201}, "limit"),
        ({"userId": "u" * 256}, "userId"),
        ({"userId": ""}, "userId"),
        ({"type": "t" * 101}, "type"),
        ({"status": "LOST"}, "status"),
        ({"channel": "pigeon"}, "channel"),
        ({"campaignId": "not-a-uuid"}, "campaignId"),
        ({"address": ""}, "address"),
        ({"from": "yesterday"}, "from"),
        ({"from": "2026-12-01T00:00:00"}, "from"),
        ({"to": "2026-12-01T00:00:00"}, "to"),
        ({"from": "2026-12-02T00:00:00Z", "to": "2026-12-01T00:00:00Z"}, "to"),
        ({"after": "x" * 101}, "after"),
        ({"after": "bm90LWFuLWlk"}, "after"),
        ({"after": "%%%"}, "after"),
    ],
)
async def test_each_parameter_is_bounded_and_named(
    client: httpx.AsyncClient, params: dict[str, Any], field: str
) -> None:
    answer = await client.get("/v1/notifications", params=params)
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["field"] == field
