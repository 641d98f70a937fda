"""Preferences: opt-outs per category and channel, at accept and again at send."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from tests.helpers import eventually, post, put_type, running_dispatcher
from tidings.priorities import Channel
from tidings.providers.testing import ScriptedProvider
from tidings.service import Service

NO_MARKETING_EMAIL = {"categories": {"marketing": {"email": False}}}


async def put_preferences(client: httpx.AsyncClient, user: str, body: dict[str, Any]) -> Any:
    response = await client.put(f"/v1/users/{user}/preferences", json=body)
    assert response.status_code == 200, response.text
    return response.json()


async def test_preferences_round_trip_with_defaults(client: httpx.AsyncClient) -> None:
    body = {
        "categories": {"marketing": {"push": True, "email": False}},
        "quietHours": {"from": "22:00", "to": "08:00"},
        "timezone": "America/Sao_Paulo",
        "locale": "pt-BR",
    }
    shown = await put_preferences(client, "u1", body)
    on = {channel.value: True for channel in Channel}
    assert shown["categories"]["marketing"] == on | {"email": False}
    assert shown["categories"]["transactional"] == on
    assert shown["quietHours"] == {"from": "22:00", "to": "08:00"}
    assert (shown["timezone"], shown["locale"]) == ("America/Sao_Paulo", "pt-BR")
    assert (await client.get("/v1/users/u1/preferences")).json() == shown
    # A later PUT replaces the categories; fields it leaves out keep their values.
    again = await put_preferences(client, "u1", {"categories": {}})
    assert again["categories"]["marketing"]["email"] is True
    assert again["timezone"] == "America/Sao_Paulo"
    assert (await client.get("/v1/users/nobody/preferences")).status_code == 404


async def test_bad_preferences_are_refused(client: httpx.AsyncClient) -> None:
    cases = [
        ({"timezone": "Mars/Olympus"}, "timezone"),
        ({"quietHours": {"from": "22:00", "to": "22:00"}}, "quietHours"),
        ({"quietHours": {"from": "25:00", "to": "08:00"}}, "quietHours.from"),
        ({"categories": {"spam": {"email": False}}}, "categories.spam.[key]"),
        ({"categories": {"marketing": {"fax": False}}}, "categories.marketing.fax.[key]"),
    ]
    for body, field in cases:
        response = await client.put("/v1/users/u1/preferences", json=body)
        assert response.status_code == 422, (body, response.text)
        assert response.json()["error"]["field"] == field, body


async def test_an_opted_out_channel_is_skipped_at_accept(client: httpx.AsyncClient) -> None:
    await put_type(client, "promo", category="marketing", priority="low", channels=("email", "sms"))
    await put_preferences(client, "u1", NO_MARKETING_EMAIL)
    to = {"email": "a@example.com", "phone": "+5511912345678"}
    response = await post(client, {"type": "promo", "userId": "u1", "to": to})
    statuses = {d["channel"]: d["status"] for d in response.json()["deliveries"]}
    assert statuses == {"email": "SKIPPED", "sms": "PENDING"}
    shown = (await client.get(f"/v1/notifications/{response.json()['id']}")).json()
    email = next(d for d in shown["deliveries"] if d["channel"] == "email")
    assert email["skipReason"] == "preference_off"


async def test_transactional_channels_cannot_be_switched_off_unless_configured(
    client: httpx.AsyncClient,
) -> None:
    await put_preferences(client, "u1", {"categories": {"transactional": {"email": False}}})
    await put_type(client, "receipt", channels=("email",))
    await put_type(client, "news.digest", channels=("email",), requiredChannels=[])
    to = {"email": "a@example.com"}
    receipt = await post(client, {"type": "receipt", "userId": "u1", "to": to})
    digest = await post(client, {"type": "news.digest", "userId": "u1", "to": to})
    assert receipt.json()["deliveries"][0]["status"] == "PENDING"
    assert digest.json()["deliveries"][0]["status"] == "SKIPPED"


async def test_an_opt_out_after_a_campaign_was_queued_stops_the_unsent(
    client: httpx.AsyncClient, service: Service
) -> None:
    await put_type(client, "promo", category="marketing", priority="low", channels=("email",))
    items = [
        {
            "idempotencyKey": f"promo-{i}",
            "type": "promo",
            "userId": f"fan{i}",
            "to": {"email": f"fan{i}@example.com"},
        }
        for i in range(1000)
    ]
    response = await client.post("/v1/notifications/batch", json={"notifications": items})
    assert all(r["status"] == "accepted" for r in response.json()["results"])
    provider = ScriptedProvider(delay=0.01)
    async with running_dispatcher(service, provider):
        await eventually(lambda: len(provider.completed) >= 50, within=20)
        # Opt-outs arrive while the campaign is sending: every tenth fan.
        await asyncio.gather(
            *(put_preferences(client, f"fan{i}", NO_MARKETING_EMAIL) for i in range(0, 1000, 10))
        )
        # "Within seconds": a batch checked just before the opt-out committed may still go.
        await asyncio.sleep(0.5)
        opted_out_at = len(provider.calls)

        async def all_done() -> bool:
            return len(provider.completed) + await _skipped_count(service) >= 1000

        await eventually(all_done, within=60)
        await asyncio.sleep(0.3)
    opted_out = {f"fan{i}@example.com" for i in range(0, 1000, 10)}
    sent_after = [c.address for c in provider.calls[opted_out_at:] if c.address in opted_out]
    assert sent_after == [], "a fan who opted out was sent to after the opt-out"
    sent_before = {c.address for c in provider.calls[:opted_out_at]} & opted_out
    assert opted_out_at < 900, "the opt-outs must arrive while most of the campaign is unsent"
    assert len(provider.calls) == 900 + len(sent_before)
    assert await _skipped_count(service) == 100 - len(sent_before)


async def _skipped_count(service: Service) -> int:
    async with service.db.engine.connect() as conn:
        query = "SELECT count(*) FROM delivery WHERE skip_reason = 'preference_off'"
        return int((await conn.exec_driver_sql(query)).scalar_one())
