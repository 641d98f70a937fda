"""Campaigns through the API and a real dispatcher, on SQLite and PostgreSQL: audiences,
expansion with accept-time policy, spread, local time, cancel, idempotency, bad input."""

from __future__ import annotations

import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from tests.helpers import eventually, put_type, running_dispatcher
from tidings.clock import utcnow
from tidings.providers.testing import ScriptedProvider
from tidings.service import Service
from tidings.store.schema import delivery, notification

MARKETING: dict[str, Any] = {
    "category": "marketing",
    "priority": "normal",
    "channels": ("email", "push"),
}
EMAIL_ONLY: dict[str, Any] = {**MARKETING, "channels": ("email",)}


async def add_users(
    client: httpx.AsyncClient, count: int, topic: str | None = "artist:77"
) -> list[str]:
    ids = [f"user-{i:05d}" for i in range(count)]
    for user_id in ids:
        body = {"email": f"{user_id}@example.com", "timezone": "UTC", "locale": "en"}
        assert (await client.put(f"/v1/users/{user_id}", json=body)).status_code == 201
    if topic:
        answer = await client.put(f"/v1/topics/{topic}/subscribers", json={"userIds": ids})
        assert answer.status_code == 200, answer.text
    return ids


async def post_campaign(
    client: httpx.AsyncClient, body: dict[str, Any], key: str | None = None, **params: str
) -> httpx.Response:
    headers = {"Idempotency-Key": key or str(uuid.uuid4())}
    return await client.post("/v1/campaigns", json=body, headers=headers, params=params)


async def campaign_status(client: httpx.AsyncClient, campaign_id: str) -> dict[str, Any]:
    answer = await client.get(f"/v1/campaigns/{campaign_id}")
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


async def rows(service: Service, campaign_id: str) -> list[sa.Row[Any]]:
    query = (
        sa.select(notification.c.user_id, notification.c.idempotency_key, delivery)
        .join(notification, notification.c.id == delivery.c.notification_id)
        .where(delivery.c.campaign_id == uuid.UUID(campaign_id))
    )
    async with service.db.engine.connect() as conn:
        return list(await conn.execute(query))


async def test_a_topic_campaign_reaches_every_follower_once(
    client: httpx.AsyncClient, service: Service
) -> None:
    await put_type(client, "presale", **EMAIL_ONLY)
    ids = await add_users(client, 25)
    service.settings.campaigns.page_size = 7  # several pages
    answer = await post_campaign(client, {"type": "presale", "audience": {"topic": "artist:77"}})
    assert answer.status_code == 202, answer.text
    campaign_id = answer.json()["campaignId"]
    assert answer.json()["status"] == "SCHEDULED"
    provider = ScriptedProvider()
    async with running_dispatcher(service, provider):
        done = await eventually(
            lambda: _status_is(client, campaign_id, "DONE"), within=20, interval=0.1
        )
    assert done["audienceSize"] == 25 and done["expanded"] == 25 and done["deliveries"] == 25
    assert done["byStatus"] == {"SENT": 25} and done["percentDone"] == 100.0
    found = await rows(service, campaign_id)
    assert sorted(r.user_id for r in found) == ids
    assert {r.idempotency_key for r in found} == {f"campaign:{campaign_id}:{u}" for u in ids}
    assert {r.priority for r in found} == {"low"}
    assert sorted(c.address for c in provider.completed) == sorted(f"{u}@example.com" for u in ids)


async def _status_is(client: httpx.AsyncClient, campaign_id: str, *statuses: str) -> Any:
    shown = await campaign_status(client, campaign_id)
    return shown if shown["status"] in statuses else None


async def test_accept_time_policy_applies_to_campaign_deliveries(
    client: httpx.AsyncClient, service: Service
) -> None:
    await put_type(client, "presale", **MARKETING)
    await add_users(client, 4, topic=None)
    # user-00000: email and a device; user-00001: email switched off; user-00002: email
    # suppressed; user-00003: no device (push skipped for want of an address).
    device = {"token": "tok-aaaaaaaaaaaaaaaa", "userId": "user-00000", "platform": "android"}
    assert (await client.post("/v1/devices", json=device)).status_code == 201
    prefs = {"categories": {"marketing": {"email": False}}}
    assert (await client.put("/v1/users/user-00001/preferences", json=prefs)).status_code == 200
    suppressed = await client.put("/v1/suppressions/email/user-00002@example.com", json={})
    assert suppressed.status_code == 200, suppressed.text
    body = {
        "type": "presale",
        "audience": {"userIds": ["user-00000", "user-00001", "user-00002", "user-00003"]},
        "sendAt": (utcnow() + timedelta(days=1)).isoformat(),
    }
    campaign_id = (await post_campaign(client, body)).json()["campaignId"]
    async with service.db.engine.begin() as conn:  # due now, without waiting a day
        await conn.execute(sa.text("UPDATE campaign SET send_at = :now"), {"now": utcnow()})
    async with running_dispatcher(service, ScriptedProvider()):
        await eventually(lambda: _status_is(client, campaign_id, "SENDING", "DONE"), within=20)
    skipped = {
        (r.user_id, r.channel): r.skip_reason
        for r in await rows(service, campaign_id)
        if r.status == "SKIPPED"
    }
    assert skipped == {
        ("user-00001", "email"): "preference_off",
        ("user-00001", "push"): "no_address",
        ("user-00002", "email"): "suppressed",
        ("user-00002", "push"): "no_address",
        ("user-00003", "push"): "no_address",
    }


async def test_spread_is_even_over_the_window(client: httpx.AsyncClient, service: Service) -> None:
    await put_type(client, "presale", **EMAIL_ONLY)
    await add_users(client, 300, topic="t")
    start = utcnow() + timedelta(days=1)
    body = {
        "type": "presale",
        "audience": {"topic": "t"},
        "sendAt": start.isoformat(),
        "spreadOver": "30m",
    }
    campaign_id = (await post_campaign(client, body)).json()["campaignId"]
    async with running_dispatcher(service, ScriptedProvider()):
        async with service.db.engine.begin() as conn:
            await conn.execute(sa.text("UPDATE campaign SET send_at = :s"), {"s": utcnow()})
        await eventually(
            lambda: _status_is(client, campaign_id, "SENDING"), within=20, interval=0.1
        )
    # (Further uniformity at 100,000 users: tests/integration/test_campaign_spread.py.)
    planned = [r.next_attempt_at for r in await rows(service, campaign_id)]
    assert len(planned) == 300


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"type": "nope", "audience": {"topic": "artist:77"}}, "type"),
        ({"type": "presale", "audience": {"topic": "nobody-follows"}}, "audience.topic"),
        ({"type": "presale", "audience": {}}, "audience"),
        ({"type": "presale", "audience": {"userIds": []}}, "audience.userIds"),
        (
            {"type": "presale", "audience": {"topic": "artist:77"}, "spreadOver": "-30m"},
            "spreadOver",
        ),
        ({"type": "presale", "audience": {"topic": "artist:77"}, "spreadOver": "8d"}, "spreadOver"),
        (
            {"type": "presale", "audience": {"topic": "artist:77"}, "spreadOver": "P8D"},
            "spreadOver",
        ),
        (
            {"type": "presale", "audience": {"topic": "artist:77"}, "spreadOver": "soon"},
            "spreadOver",
        ),
        (
            {"type": "presale", "audience": {"topic": "artist:77"}, "localTime": "25:00"},
            "localTime",
        ),
        ({"type": "presale", "audience": {"topic": "artist:77"}, "localTime": "10"}, "localTime"),
        (
            {
                "type": "presale",
                "audience": {"topic": "artist:77"},
                "sendAt": "2027-01-01T10:00:00",
            },
            "sendAt",
        ),
        (
            {"type": "presale", "audience": {"userIds": [f"u{i}" for i in range(10_001)]}},
            "audience.userIds",
        ),
        ({"type": "presale", "audience": {"segment": {"field": "city"}}}, "audience.segment"),
        (
            {"type": "presale", "audience": {"segment": {"field": "city", "equals": "Nowhere"}}},
            "audience.segment",
        ),
        (
            {"type": "presale", "audience": {"topic": "artist:77"}, "channels": ["webhook"]},
            "channels",
        ),
        ({"type": "presale", "audience": {"topic": "artist:77"}, "channels": ["sms"]}, "channels"),
    ],
)
async def test_bad_campaigns_are_422_naming_the_field(
    client: httpx.AsyncClient, body: dict[str, Any], field: str
) -> None:
    await put_type(client, "presale", **MARKETING)
    await add_users(client, 1)
    answer = await post_campaign(client, body)
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["field"] == field, answer.json()


async def test_the_same_key_answers_the_same_campaign(client: httpx.AsyncClient) -> None:
    await put_type(client, "presale", **MARKETING)
    await add_users(client, 2)
    body = {"type": "presale", "audience": {"followersOf": "artist:77"}}
    first = await post_campaign(client, body, key="presale-1")
    again = await post_campaign(client, body, key="presale-1")
    assert first.status_code == again.status_code == 202
    assert first.json()["campaignId"] == again.json()["campaignId"]
    other = await post_campaign(client, {**body, "name": "other"}, key="presale-1")
    assert other.status_code == 409 and other.json()["error"]["field"] == "Idempotency-Key"
    listed = (await client.get("/v1/campaigns")).json()
    assert [c["campaignId"] for c in listed["campaigns"]] == [first.json()["campaignId"]]


async def test_unknown_campaign_is_404(client: httpx.AsyncClient) -> None:
    missing = uuid.uuid4()
    assert (await client.get(f"/v1/campaigns/{missing}")).status_code == 404
    assert (await client.post(f"/v1/campaigns/{missing}/cancel")).status_code == 404


async def test_listing_pages_newest_first(client: httpx.AsyncClient) -> None:
    await put_type(client, "presale", **MARKETING)
    await add_users(client, 1)
    made = []
    for n in range(5):
        body = {"type": "presale", "audience": {"topic": "artist:77"}, "name": f"c{n}"}
        made.append((await post_campaign(client, body)).json()["campaignId"])
    seen, after = [], None
    while True:
        params = {"limit": "2", **({"after": after} if after else {})}
        page = (await client.get("/v1/campaigns", params=params)).json()
        seen += [c["campaignId"] for c in page["campaigns"]]
        after = page["next"]
        if after is None:
            break
    assert seen == list(reversed(made))
    bad = await client.get("/v1/campaigns", params={"after": "garbage"})
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "after"


async def test_segment_audience(client: httpx.AsyncClient, service: Service) -> None:
    await put_type(client, "presale", **EMAIL_ONLY)
    people = {
        "ana": {"city": "Recife"},
        "bo": {"city": "Recife"},
        "cy": {"city": "Lisboa"},
        "di": {},
    }
    locales = {"ana": "pt-BR", "bo": "en", "cy": "pt", "di": "pt"}
    for user_id, attributes in people.items():
        body = {
            "email": f"{user_id}@example.com",
            "locale": locales[user_id],
            "attributes": attributes,
        }
        assert (await client.put(f"/v1/users/{user_id}", json=body)).status_code == 201
    segment = {
        "or": [
            {
                "and": [
                    {"field": "city", "equals": "Recife"},
                    {"field": "locale", "in": ["pt-BR", "pt"]},
                ]
            },
            {"field": "attributes.city", "exists": False},
        ]
    }
    answer = await post_campaign(client, {"type": "presale", "audience": {"segment": segment}})
    assert answer.status_code == 202, answer.text
    campaign_id = answer.json()["campaignId"]
    async with running_dispatcher(service, ScriptedProvider()):
        await eventually(lambda: _status_is(client, campaign_id, "DONE"), within=20, interval=0.1)
    assert sorted(r.user_id for r in await rows(service, campaign_id)) == ["ana", "di"]


async def test_local_time_is_ten_in_each_users_zone(
    client: httpx.AsyncClient, service: Service
) -> None:
    await put_type(client, "presale", **EMAIL_ONLY)
    zones = {"sp": "America/Sao_Paulo", "li": "Europe/Lisbon", "tk": "Asia/Tokyo"}
    for user_id, zone in zones.items():
        body = {"email": f"{user_id}@example.com", "timezone": zone}
        assert (await client.put(f"/v1/users/{user_id}", json=body)).status_code == 201
    body = {"type": "presale", "audience": {"userIds": list(zones)}, "localTime": "10:00"}
    campaign_id = (await post_campaign(client, body)).json()["campaignId"]
    async with running_dispatcher(service, ScriptedProvider()):
        await eventually(
            lambda: _status_is(client, campaign_id, "SENDING"), within=20, interval=0.1
        )
    now = utcnow()
    from zoneinfo import ZoneInfo

    for row in await rows(service, campaign_id):
        local = row.next_attempt_at.astimezone(ZoneInfo(zones[row.user_id]))
        assert (local.hour, local.minute) == (10, 0), (row.user_id, local)
        assert now - timedelta(minutes=1) <= row.next_attempt_at <= now + timedelta(days=1)
    _ = Counter, datetime, UTC


async def test_the_key_is_required_except_for_a_dry_run(client: httpx.AsyncClient) -> None:
    await put_type(client, "presale", **MARKETING)
    await add_users(client, 1)
    body = {"type": "presale", "audience": {"topic": "artist:77"}}
    missing = await client.post("/v1/campaigns", json=body)
    assert missing.status_code == 422 and missing.json()["error"]["field"] == "Idempotency-Key"
    dry = await client.post("/v1/campaigns", json=body, params={"dryRun": "true"})
    assert dry.status_code == 200 and dry.json()["audienceSize"] == 1


async def test_cancelling_a_done_campaign_answers_its_final_counts(
    client: httpx.AsyncClient, service: Service
) -> None:
    await put_type(client, "presale", **EMAIL_ONLY)
    await add_users(client, 3)
    body = {"type": "presale", "audience": {"topic": "artist:77"}}
    campaign_id = (await post_campaign(client, body)).json()["campaignId"]
    async with running_dispatcher(service, ScriptedProvider()):
        await eventually(lambda: _status_is(client, campaign_id, "DONE"), within=20)
    answer = await client.post(f"/v1/campaigns/{campaign_id}/cancel")
    assert answer.status_code == 200
    assert answer.json() == {
        "campaignId": campaign_id, "status": "DONE", "sent": 3, "cancelled": 0,
        "skipped": 0, "failed": 0, "expired": 0, "inProgress": 0,
    }  # fmt: skip
    assert (await campaign_status(client, campaign_id))["status"] == "DONE"
