"""The design's own request shapes, beside tidings' own: numeric user ids, a category named
as the priority, notificationId in the answer, preferences flat by category; and what GET
preferences shows for a channel a choice cannot switch off."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.helpers import post, put_type
from tidings.priorities import Channel

TOO_BIG = 2**63
NOT_IDS: list[Any] = [42.0, 4.2, True, -1, TOO_BIG, "", None]


def _error(response: httpx.Response) -> tuple[int, str | None, str]:
    error = response.json()["error"]
    return response.status_code, error["field"], error["code"]


async def test_a_numeric_user_id_is_the_user_named_by_its_decimal_text(
    client: httpx.AsyncClient,
) -> None:
    await put_type(client, channels=("email",))
    assert (await client.put("/v1/users/42", json={"email": "fan@example.com"})).status_code == 201
    response = await post(client, {"type": "order.confirmed", "userId": 42})
    assert response.status_code == 202, response.text
    answer = response.json()
    assert answer["notificationId"] == answer["id"] and answer["status"] == "accepted"
    shown = (await client.get(f"/v1/notifications/{answer['id']}")).json()
    assert shown["userId"] == "42"
    assert shown["deliveries"][0]["status"] == "PENDING", shown  # the profile's email found
    # The same key with "42" as text is the same request: a replay, not a conflict.
    again = await post(client, {"type": "order.confirmed", "userId": "42"}, key="k")
    replay = await post(client, {"type": "order.confirmed", "userId": 42}, key="k")
    assert (replay.status_code, replay.json()["id"]) == (202, again.json()["id"]), replay.text
    assert replay.headers.get("Idempotent-Replayed") == "true"
    biggest = TOO_BIG - 1
    await client.put(f"/v1/users/{biggest}", json={"email": "big@example.com"})
    response = await post(client, {"type": "order.confirmed", "userId": biggest})
    assert response.status_code == 202, response.text


@pytest.mark.parametrize("route", ["/v1/notifications", "/v1/devices", "/v1/templates/preview"])
async def test_user_ids_that_are_not_text_or_integers_in_range_are_refused(
    client: httpx.AsyncClient, route: str
) -> None:
    await put_type(client, channels=("email",))
    base: dict[str, Any] = {
        "/v1/notifications": {"type": "order.confirmed", "to": {"email": "a@example.com"}},
        "/v1/devices": {"platform": "ios", "token": "abc"},
        "/v1/templates/preview": {"type": "order.confirmed"},
    }[route]
    for value in NOT_IDS:
        headers = {"Idempotency-Key": f"k-{value!r}"}
        response = await client.post(route, json={**base, "userId": value}, headers=headers)
        if value is None and route != "/v1/devices":
            continue  # no user: allowed where the id is optional
        assert _error(response)[:2] == (422, "userId"), (value, response.text)


async def test_devices_take_a_numeric_user_id(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/v1/devices", json={"userId": 42, "platform": "ios", "token": "a1b2"}
    )
    assert response.status_code == 201, response.text
    assert response.json()["userId"] == "42"
    listed = (await client.get("/v1/users/42/devices")).json()
    assert [d["token"] for d in listed] == ["a1b2"]


async def test_a_category_as_priority_must_be_the_types_and_keeps_its_priority(
    client: httpx.AsyncClient,
) -> None:
    await put_type(client, priority="high", channels=("email",))
    to = {"email": "a@example.com"}
    named = await post(client, {"type": "order.confirmed", "priority": "transactional", "to": to})
    assert named.status_code == 202, named.text
    shown = (await client.get(f"/v1/notifications/{named.json()['id']}")).json()
    assert (shown["category"], shown["priority"]) == ("transactional", "high")
    for wrong in ("marketing", "reminder"):
        refused = await post(client, {"type": "order.confirmed", "priority": wrong, "to": to})
        assert _error(refused) == (422, "priority", "priority_category_mismatch"), refused.text
    unknown = await post(client, {"type": "order.confirmed", "priority": "urgent", "to": to})
    assert _error(unknown)[:2] == (422, "priority"), unknown.text
    lowered = await post(client, {"type": "order.confirmed", "priority": "low", "to": to})
    shown = (await client.get(f"/v1/notifications/{lowered.json()['id']}")).json()
    assert shown["priority"] == "low"


async def test_the_batch_takes_the_same_shapes(client: httpx.AsyncClient) -> None:
    await put_type(client, channels=("email",))
    to = {"email": "a@example.com"}
    item = {"type": "order.confirmed", "userId": 7, "priority": "transactional", "to": to}
    items = [
        {**item, "idempotencyKey": "b1"},
        {**item, "idempotencyKey": "b2", "priority": "marketing"},
        {**item, "idempotencyKey": "b3", "userId": 7.5},
    ]
    response = await client.post("/v1/notifications/batch", json={"notifications": items})
    assert response.status_code == 200, response.text
    first, wrong, fractional = response.json()["results"]
    assert first["status"] == "accepted" and first["notificationId"] == first["id"]
    assert (wrong["status"], wrong["error"]["field"]) == ("error", "priority")
    assert (fractional["status"], fractional["error"]["field"]) == ("error", "userId")
    shown = (await client.get(f"/v1/notifications/{first['id']}")).json()
    assert shown["userId"] == "7"


SEED_PREFERENCES = {
    "marketing": {"push": True, "email": False},
    "quietHours": {"from": "22:00", "to": "08:00"},
    "timezone": "America/Sao_Paulo",
    "locale": "pt-BR",
}


async def test_preferences_may_be_given_flat_by_category(client: httpx.AsyncClient) -> None:
    response = await client.put("/v1/users/42/preferences", json=SEED_PREFERENCES)
    assert response.status_code == 200, response.text
    shown = (await client.get("/v1/users/42/preferences")).json()
    # Every channel is on unless switched off (the chat channels too).
    assert shown["categories"]["marketing"] == {c.value: True for c in Channel} | {"email": False}
    assert shown["quietHours"] == {"from": "22:00", "to": "08:00"}
    assert (shown["timezone"], shown["locale"]) == ("America/Sao_Paulo", "pt-BR")
    # The same choices in tidings' own shape are the same preferences.
    nested = {"categories": {"marketing": {"push": True, "email": False}}}
    again = await client.put("/v1/users/42/preferences", json=nested)
    assert again.json()["categories"] == shown["categories"]


async def test_bad_flat_preferences_are_refused_naming_the_field(
    client: httpx.AsyncClient,
) -> None:
    cases = [
        ({"marketing": {"fax": False}}, "marketing.fax.[key]"),
        ({"marketing": {"email": "no"}}, "marketing.email"),
        ({"marketing": {"email": 0}}, "marketing.email"),
        ({"spam": {"email": False}}, "spam"),
        ({"marketing": {}, "categories": {"reminder": {"sms": False}}}, "categories"),
    ]
    for body, field in cases:
        response = await client.put("/v1/users/u1/preferences", json=body)
        assert _error(response)[:2] == (422, field), (body, response.text)


async def test_a_required_channel_is_shown_on_and_required(client: httpx.AsyncClient) -> None:
    """A transactional type requires its channels unless it says otherwise: a choice to
    switch one off changes nothing for it, so GET must not show the channel as off."""
    await put_type(client, "receipt", channels=("email", "sms"), requiredChannels=["email"])
    body = {"categories": {"transactional": {"email": False, "sms": False}}}
    shown = (await client.put("/v1/users/u1/preferences", json=body)).json()
    assert shown["categories"]["transactional"]["email"] is True
    assert shown["categories"]["transactional"]["sms"] is False
    assert "email" in shown["required"]["transactional"]
    assert "sms" not in shown["required"]["transactional"]
    assert shown["required"]["marketing"] == []
    # Once a transactional type lets the user switch email off, the choice applies.
    await put_type(client, "digest", channels=("email",), requiredChannels=[])
    shown = (await client.get("/v1/users/u1/preferences")).json()
    assert shown["categories"]["transactional"]["email"] is False
    assert "email" not in shown["required"]["transactional"]
