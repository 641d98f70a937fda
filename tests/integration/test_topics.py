"""Topics, who follows what: PUT/DELETE /v1/topics/{topic}/subscribers, GET /v1/topics/{topic}
and GET /v1/users/{id}/topics, on SQLite and PostgreSQL."""

from __future__ import annotations

import httpx
import pytest


async def subscribe(client: httpx.AsyncClient, topic: str, *user_ids: str) -> httpx.Response:
    return await client.put(f"/v1/topics/{topic}/subscribers", json={"userIds": list(user_ids)})


async def test_adding_subscribers_counts_only_the_new_ones(client: httpx.AsyncClient) -> None:
    first = await subscribe(client, "artist:77", "ana", "bo", "ana")
    assert first.status_code == 200, first.text
    assert first.json() == {"topic": "artist:77", "added": 2, "subscribers": 2}
    again = await subscribe(client, "artist:77", "bo", "ana")
    assert again.json() == {"topic": "artist:77", "added": 0, "subscribers": 2}
    more = await subscribe(client, "artist:77", "ana", "cy")
    assert more.json() == {"topic": "artist:77", "added": 1, "subscribers": 3}
    shown = await client.get("/v1/topics/artist:77")
    assert shown.status_code == 200 and shown.json() == {"topic": "artist:77", "subscribers": 3}


async def test_ten_thousand_ids_in_one_call(client: httpx.AsyncClient) -> None:
    # 64-character ids: the body (about 670 KB) is over the 256 KiB default limit, too.
    ids = [f"{i:064d}" for i in range(10_000)]
    added = await subscribe(client, "news", *ids)
    assert added.status_code == 200, added.text
    assert added.json() == {"topic": "news", "added": 10_000, "subscribers": 10_000}
    half_again = await subscribe(client, "news", *ids[5_000:], "new-one")
    assert half_again.json() == {"topic": "news", "added": 1, "subscribers": 10_001}
    too_many = await subscribe(client, "news", *[f"u{i}" for i in range(10_001)])
    assert too_many.status_code == 422
    assert too_many.json()["error"]["field"] == "userIds"
    assert (await client.get("/v1/topics/news")).json()["subscribers"] == 10_001


@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("/v1/topics/a%2Fb/subscribers", "topic"),
        ("/v1/topics/a%09b/subscribers", "topic"),
        ("/v1/topics/a%7Fb/subscribers", "topic"),
        (f"/v1/topics/{'t' * 201}/subscribers", "topic"),
    ],
)
async def test_a_bad_topic_name_is_a_422(client: httpx.AsyncClient, path: str, field: str) -> None:
    answer = await client.put(path, json={"userIds": ["ana"]})
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["field"] == field
    if "%2F" in path:
        assert "no '/'" in answer.json()["error"]["message"]
    # A GET takes the topic as one path segment: "a/b" is no route there (404).
    shown = await client.get(path.removesuffix("/subscribers"))
    assert shown.status_code == (404 if "%2F" in path else 422)


async def test_the_longest_topic_and_odd_characters_are_fine(client: httpx.AsyncClient) -> None:
    for topic in ("t" * 200, "artist:77 é ☃", "a%3Fb"):  # the last one is "a?b"
        answer = await subscribe(client, topic, "ana")
        assert answer.status_code == 200, answer.text
    topics = (await client.get("/v1/users/ana/topics")).json()["topics"]
    assert topics == sorted(["t" * 200, "artist:77 é ☃", "a?b"])


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"userIds": []}, "userIds"),
        ({"userIds": ["ana", ""]}, "userIds.1"),
        ({"userIds": ["x" * 256]}, "userIds.0"),
        ({"userIds": "ana"}, "userIds"),
        ({}, "userIds"),
        ({"userIds": ["ana"], "extra": 1}, "extra"),
    ],
)
async def test_bad_user_ids_are_a_422_naming_the_field(
    client: httpx.AsyncClient, body: dict[str, object], field: str
) -> None:
    answer = await client.put("/v1/topics/news/subscribers", json=body)
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["field"] == field
    assert (await client.get("/v1/topics/news")).status_code == 404  # nothing was added


async def test_delete_a_subscription_then_404(client: httpx.AsyncClient) -> None:
    await subscribe(client, "artist:77", "ana", "bo")
    gone = await client.delete("/v1/topics/artist:77/subscribers/ana")
    assert gone.status_code == 204
    again = await client.delete("/v1/topics/artist:77/subscribers/ana")
    assert again.status_code == 404 and again.json()["error"]["code"] == "not_found"
    assert (await client.get("/v1/topics/artist:77")).json()["subscribers"] == 1
    assert (await client.delete("/v1/topics/nobody/subscribers/bo")).status_code == 404
    assert (await client.delete("/v1/topics/artist:77/subscribers/bo")).status_code == 204
    emptied = await client.get("/v1/topics/artist:77")
    assert emptied.status_code == 404 and emptied.json()["error"]["code"] == "not_found"


async def test_a_topic_nobody_ever_followed_is_404(client: httpx.AsyncClient) -> None:
    answer = await client.get("/v1/topics/artist:1")
    assert answer.status_code == 404
    assert answer.json()["error"] == {
        "code": "not_found",
        "message": "nobody follows 'artist:1'",
        "field": "topic",
    }


async def test_a_users_topics_sorted(client: httpx.AsyncClient) -> None:
    for topic in ("zeta", "artist:77", "Beta", "artist:8"):
        await subscribe(client, topic, "ana", "bo")
    await client.delete("/v1/topics/zeta/subscribers/bo")
    ana = await client.get("/v1/users/ana/topics")
    assert ana.status_code == 200
    assert ana.json() == {"userId": "ana", "topics": ["Beta", "artist:77", "artist:8", "zeta"]}
    bo = (await client.get("/v1/users/bo/topics")).json()["topics"]
    assert bo == ["Beta", "artist:77", "artist:8"]
    # No profile needed, and a user who follows nothing has an empty list.
    assert (await client.get("/v1/users/cy/topics")).json() == {"userId": "cy", "topics": []}
    assert (await client.get("/v1/users/ana")).status_code == 404
