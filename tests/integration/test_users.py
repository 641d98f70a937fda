"""Users as a set (issue 29): GET /v1/users by id prefix and attribute, paged in id order;
POST /v1/users/batch, up to 1,000 profiles all or none."""

from __future__ import annotations

from typing import Any

import httpx
import pytest


async def batch(client: httpx.AsyncClient, users: list[dict[str, Any]]) -> httpx.Response:
    return await client.post("/v1/users/batch", json={"users": users})


def ids(page: dict[str, Any]) -> list[str]:
    return [user["id"] for user in page["users"]]


async def test_a_batch_creates_then_replaces_keeping_quiet_hours(
    client: httpx.AsyncClient,
) -> None:
    users = [{"id": f"u{i:04d}", "email": f"u{i}@example.com"} for i in range(1000)]
    answer = await batch(client, users)
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"created": 1000, "replaced": 0}
    quiet = {"quietHours": {"from": "22:00", "to": "08:00"}, "timezone": "UTC"}
    assert (await client.put("/v1/users/u0001/preferences", json=quiet)).status_code == 200
    changed = {"id": "u0001", "phone": "+15550001111", "attributes": {"plan": "pro"}}
    again = await batch(client, [changed, {"id": "new"}])
    assert again.json() == {"created": 1, "replaced": 1}
    profile = (await client.get("/v1/users/u0001")).json()
    assert (profile["email"], profile["phone"]) == (None, "+15550001111")
    assert profile["quietHours"] == {"from": "22:00", "to": "08:00"}


@pytest.mark.parametrize(
    ("users", "field"),
    [
        ([], "users"),
        ([{"id": f"u{i}"} for i in range(1001)], "users"),
        ([{"id": "a"}, {"id": "a"}], "users"),
        ([{"id": "a"}, {"id": "b", "email": "not an address"}], "users.1.email"),
        ([{"email": "a@example.com"}], "users.0.id"),
        ([{"id": "x" * 256}], "users.0.id"),
    ],
)
async def test_a_bad_batch_is_422_naming_the_item_and_stores_nothing(
    client: httpx.AsyncClient, users: list[dict[str, Any]], field: str
) -> None:
    answer = await batch(client, users)
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["field"] == field
    assert (await client.get("/v1/users")).json()["users"] == []


async def test_users_are_listed_by_prefix_and_attribute_a_page_at_a_time(
    client: httpx.AsyncClient,
) -> None:
    users = [
        {"id": "ana", "attributes": {"plan": "pro", "city": "Porto"}},
        {"id": "anabel", "attributes": {"plan": "free"}},
        {"id": "bob", "locale": "pt-BR", "attributes": {"plan": "pro"}},
        {"id": "an_x"},
        {"id": "anz%"},
    ]
    assert (await batch(client, users)).status_code == 200
    assert ids((await client.get("/v1/users", params={"idPrefix": "ana"})).json()) == [
        "ana",
        "anabel",
    ]
    # LIKE's wildcards are matched as themselves.
    assert ids((await client.get("/v1/users", params={"idPrefix": "an_"})).json()) == ["an_x"]
    assert ids((await client.get("/v1/users", params={"idPrefix": "anz%"})).json()) == ["anz%"]
    pro = {"attribute": "plan", "equals": "pro"}
    assert ids((await client.get("/v1/users", params=pro)).json()) == ["ana", "bob"]
    both = {**pro, "idPrefix": "b"}
    assert ids((await client.get("/v1/users", params=both)).json()) == ["bob"]
    locale = {"attribute": "locale", "equals": "pt-BR"}
    assert ids((await client.get("/v1/users", params=locale)).json()) == ["bob"]

    seen: list[str] = []
    page = (await client.get("/v1/users", params={"limit": 2})).json()
    while True:
        seen += ids(page)
        if page["next"] is None:
            break
        page = (await client.get("/v1/users", params={"limit": 2, "after": page["next"]})).json()
    assert sorted(seen) == sorted(u["id"] for u in users) and len(seen) == len(set(seen))


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"limit": 0}, "limit"),
        ({"limit": 501}, "limit"),
        ({"idPrefix": ""}, "idPrefix"),
        ({"idPrefix": "x" * 256}, "idPrefix"),
        ({"attribute": "plan"}, "equals"),
        ({"equals": "pro"}, "attribute"),
        ({"attribute": "a" * 101, "equals": "x"}, "attribute"),
        ({"after": "_w"}, "after"),
    ],
)
async def test_each_list_parameter_is_bounded_and_named(
    client: httpx.AsyncClient, params: dict[str, Any], field: str
) -> None:
    answer = await client.get("/v1/users", params=params)
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["field"] == field
