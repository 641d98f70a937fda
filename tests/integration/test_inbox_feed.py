"""The inbox feed API (docs/inbox.md): pages with a stable cursor and counts, the state
changes, seen and read in the delivery's history and the event log; user tokens bound to
one user, expiring, refused on every other route; CORS for the configured origins only."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import jwt
import pytest

from tests.helpers import eventually, post, running_dispatcher
from tests.integration.test_inbox_channel import inbox_type, register
from tidings.api.app import create_app
from tidings.api.auth import Keyring, Scope, issue_key
from tidings.ids import new_id
from tidings.policy.inbox_tokens import AUDIENCE, PREFIX, InboxTokens, signing_key
from tidings.providers.testing import ScriptedProvider
from tidings.service import Service
from tidings.settings import Settings
from tidings.store import api_keys, inbox, users
from tidings.store.engine import Database


@pytest.fixture(autouse=True)
async def users_registered(db: Database) -> None:
    """Only registered users have a feed."""
    for user in ("ana", "bob"):
        await users.put_user_settings(db, user, {}, datetime.now(UTC))


async def fill(db: Database, user: str, count: int) -> list[uuid.UUID]:
    """``count`` messages for ``user``, oldest first."""
    ids = []
    for n in range(count):
        message = inbox.NewMessage(
            new_id(), new_id(), user, "promo", "marketing", f"title {n}", f"body {n}", {"n": n}
        )
        stored = await inbox.store(db, message, datetime.now(UTC))
        assert stored is not None
        ids.append(stored.id)
    return ids


async def test_pages_are_newest_first_with_a_stable_cursor_and_counts(
    client: httpx.AsyncClient, db: Database
) -> None:
    ids = await fill(db, "ana", 5)
    await fill(db, "bob", 2)
    first = (await client.get("/v1/users/ana/inbox", params={"limit": 2})).json()
    assert [i["id"] for i in first["items"]] == [str(i) for i in ids[::-1][:2]]
    assert first["counts"] == {"unseen": 5, "unread": 5, "total": 5}
    assert first["items"][0]["subject"] == "title 4" and first["items"][0]["data"] == {"n": 4}
    # A message arriving between pages does not shift the pages after the cursor.
    newer = await fill(db, "ana", 1)
    second = (await client.get(f"/v1/users/ana/inbox?limit=2&after={first['next']}")).json()
    third = (await client.get(f"/v1/users/ana/inbox?limit=2&after={second['next']}")).json()
    read = [i["id"] for page in (first, second, third) for i in page["items"]]
    assert read == [str(i) for i in ids[::-1]]
    assert third["next"] is None
    top = (await client.get("/v1/users/ana/inbox?limit=1")).json()
    assert top["items"][0]["id"] == str(newer[0]) and top["counts"]["total"] == 6


async def test_state_changes_filters_and_counts(client: httpx.AsyncClient, db: Database) -> None:
    ids = [str(i) for i in await fill(db, "ana", 4)]
    base = "/v1/users/ana/inbox"
    changed = (await client.post(f"{base}/{ids[0]}/read")).json()
    assert changed["item"]["readAt"] is not None
    assert changed["counts"] == {"unseen": 4, "unread": 3, "total": 4}
    assert (await client.post(f"{base}/{ids[1]}/seen")).json()["counts"]["unseen"] == 3
    assert (await client.post(f"{base}/{ids[2]}/archive")).json()["counts"]["total"] == 3

    async def shown(status: str) -> list[str]:
        page = (await client.get(base, params={"status": status})).json()
        return sorted(i["id"] for i in page["items"])

    assert await shown("archived") == [ids[2]]
    assert await shown("unread") == sorted([ids[1], ids[3]])
    assert await shown("unseen") == sorted([ids[0], ids[3]])
    assert await shown("all") == sorted([ids[0], ids[1], ids[3]])
    again = (await client.post(f"{base}/{ids[0]}/unread")).json()
    assert again["item"]["readAt"] is None and again["counts"]["unread"] == 3
    back = (await client.post(f"{base}/{ids[2]}/unarchive")).json()
    assert back["item"]["archivedAt"] is None and back["counts"]["total"] == 4
    everything = (await client.post(f"{base}/read-all")).json()
    assert everything == {"changed": 4, "counts": {"unseen": 3, "unread": 0, "total": 4}}
    assert (await client.post(f"{base}/seen-all")).json()["counts"]["unseen"] == 0
    assert (await client.post(f"{base}/read-all")).json()["changed"] == 0


@pytest.mark.parametrize(
    ("method", "path", "field", "status"),
    [
        ("GET", "/v1/users/ana/inbox?status=new", "status", 422),
        ("GET", "/v1/users/ana/inbox?limit=0", "limit", 422),
        ("GET", "/v1/users/ana/inbox?limit=101", "limit", 422),
        ("GET", "/v1/users/ana/inbox?after=garbage", "after", 422),
        ("POST", "/v1/users/ana/inbox/not-an-id/read", "itemId", 422),
        ("POST", "/v1/users/ana/inbox/0190aaaa-0000-7000-8000-000000000001/read", "itemId", 404),
        ("POST", "/v1/users/ana/inbox/0190aaaa-0000-7000-8000-000000000001/burn", "action", 422),
        ("POST", "/v1/users/ana/inbox/burn-all", "action", 422),
    ],
)
async def test_bad_requests_name_their_field(
    client: httpx.AsyncClient, method: str, path: str, field: str, status: int
) -> None:
    response = await client.request(method, path)
    assert response.status_code == status, response.text
    assert response.json()["error"]["field"] == field


async def test_an_unknown_or_erased_user_has_no_feed(
    client: httpx.AsyncClient, db: Database
) -> None:
    await fill(db, "bob", 1)
    for method, path in feed_routes("nobody", str(uuid.uuid4())):
        response = await client.request(method, path)
        assert response.status_code == 404, (path, response.text)
        assert response.json()["error"]["field"] == "userId"
    assert (await client.post("/v1/users/nobody/inbox-token")).status_code == 404
    assert (await client.delete("/v1/users/bob")).status_code in (200, 204)
    assert (await client.get("/v1/users/bob/inbox")).status_code == 404
    assert (await inbox.counts(db, "bob")).total == 0


async def test_a_message_of_another_user_is_not_found(
    client: httpx.AsyncClient, db: Database
) -> None:
    [bobs] = await fill(db, "bob", 1)
    response = await client.post(f"/v1/users/ana/inbox/{bobs}/read")
    assert response.status_code == 404
    assert (await inbox.get(db, "bob", bobs)) is not None
    assert (await client.get("/v1/users/bob/inbox")).json()["counts"]["unread"] == 1


async def test_seen_and_read_land_in_the_history_and_the_event_log(
    client: httpx.AsyncClient, service: Service
) -> None:
    await inbox_type(client)
    await register(client, "ana")
    body = {"type": "order.shipped", "userId": "ana", "channels": ["inbox"]}
    accepted = (await post(client, {**body, "data": {"order": 1, "name": "Ana"}})).json()
    async with running_dispatcher(service, ScriptedProvider()):
        feed = await eventually(lambda: _items(client, "ana"), within=15)
    item = feed[0]
    assert item["notificationId"] == accepted["id"]
    for action in ("seen", "read", "read"):  # read twice: recorded once
        response = await client.post(f"/v1/users/ana/inbox/{item['id']}/{action}")
        assert response.status_code == 200, response.text
    shown = (await client.get(f"/v1/notifications/{accepted['id']}")).json()
    kinds = [h["kind"] for h in shown["deliveries"][0]["history"]]
    assert kinds[-2:] == ["seen", "read"] and kinds.count("read") == 1
    assert shown["deliveries"][0]["history"][-1]["detail"]["inboxMessageId"] == item["id"]
    delivery_id = shown["deliveries"][0]["id"]

    async def logged() -> list[tuple[str, str]]:
        # PostgreSQL: the log shows an event once no older transaction is still running.
        params = {"types": ["inbox.seen", "inbox.read"]}
        events = (await client.get("/v1/events", params=params)).json()["events"]
        return [(e["type"], e["data"]["deliveryId"]) for e in events]

    found = await eventually(logged)
    assert found == [("inbox.seen", delivery_id), ("inbox.read", delivery_id)]


async def _items(client: httpx.AsyncClient, user: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = (await client.get(f"/v1/users/{user}/inbox")).json()["items"]
    return items


# --- user tokens --------------------------------------------------------------------------


@pytest.fixture
def allowed_origin(settings: Settings) -> str:
    origin = "https://app.example"
    settings.inbox.allowed_origins = [origin]
    return origin


@pytest.fixture
async def keyed(service: Service, allowed_origin: str) -> Any:
    """An app with keys (so nothing is open), a client per key, and a helper to mint."""
    app = create_app(service)
    keys = {}
    for name, scope in {"send": Scope.SEND, "read": Scope.READ, "tpl": Scope.TEMPLATES}.items():
        key, stored = issue_key(name, [scope.value], "default")
        await api_keys.insert(service.db, stored)
        keys[name] = key
    keyring: Keyring = app.state.keyring
    keyring.forget()
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://tidings") as client:
        yield client, keys


def feed_routes(user: str, item: str) -> list[tuple[str, str]]:
    return [
        ("GET", f"/v1/users/{user}/inbox"),
        ("GET", f"/v1/users/{user}/inbox?status=unread&limit=5"),
        *(("POST", f"/v1/users/{user}/inbox/{item}/{a}") for a in ("seen", "read", "unread")),
        *(("POST", f"/v1/users/{user}/inbox/{item}/{a}") for a in ("archive", "unarchive")),
        ("POST", f"/v1/users/{user}/inbox/read-all"),
        ("POST", f"/v1/users/{user}/inbox/seen-all"),
    ]


async def mint(client: httpx.AsyncClient, key: str, user: str) -> str:
    response = await client.post(f"/v1/users/{user}/inbox-token", headers=_bearer(key))
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["userId"] == user
    expires = datetime.fromisoformat(body["expiresAt"]) - datetime.now(UTC)
    assert timedelta(minutes=59) < expires <= timedelta(hours=1)
    token: str = body["token"]
    return token


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_a_users_token_reads_their_feed_and_never_anothers(keyed: Any, db: Database) -> None:
    client, keys = keyed
    [anas] = await fill(db, "ana", 1)
    [bobs] = await fill(db, "bob", 1)
    token = await mint(client, keys["send"], "ana")
    for method, path in feed_routes("ana", str(anas)):
        response = await client.request(method, path, headers=_bearer(token))
        assert response.status_code == 200, (path, response.text)
    for method, path in feed_routes("bob", str(bobs)):
        response = await client.request(method, path, headers=_bearer(token))
        assert response.status_code == 403, (path, response.text)
        assert response.json()["error"]["code"] == "forbidden"
    # Bob's messages were not touched through any of those.
    assert (await inbox.counts(db, "bob")).unread == 1
    # Nor through the query parameter, which only the stream reads.
    response = await client.get(f"/v1/users/bob/inbox?token={token}")
    assert response.status_code == 401


async def test_a_user_token_opens_no_other_route(keyed: Any) -> None:
    client, keys = keyed
    token = await mint(client, keys["send"], "ana")
    others = [
        ("GET", "/v1/users/ana/preferences"),
        ("PUT", "/v1/users/ana"),
        ("POST", "/v1/users/ana/inbox-token"),
        ("GET", f"/v1/notifications/{uuid.uuid4()}"),
        ("POST", "/v1/notifications"),
        ("GET", "/v1/events"),
        ("GET", "/v1/types/promo"),
    ]
    for method, path in others:
        response = await client.request(method, path, headers=_bearer(token), json={})
        assert response.status_code == 401, (path, response.text)


async def test_forged_altered_and_expired_tokens_are_refused(keyed: Any, service: Service) -> None:
    client, keys = keyed
    token = await mint(client, keys["send"], "ana")
    header, claims, signature = token.removeprefix(PREFIX).split(".")
    flipped = signature[:-2] + ("AA" if signature[-2:] != "AA" else "BB")
    stale = InboxTokens("test-secret", 60).mint("ana", datetime.now(UTC) - timedelta(hours=2))
    foreign = InboxTokens("another-secret", 3600).mint("ana", datetime.now(UTC))
    unsigned = PREFIX + jwt.encode({"sub": "ana", "aud": AUDIENCE}, "", algorithm="none")
    now = datetime.now(UTC)
    forever = {"sub": "ana", "aud": AUDIENCE, "exp": now + timedelta(days=30)}
    too_long = PREFIX + jwt.encode(forever, signing_key("test-secret"), algorithm="HS256")
    for bad in (
        f"{PREFIX}{header}.{claims}.{flipped}",
        stale.token,
        foreign.token,
        unsigned,
        too_long,
        PREFIX + "garbage",
    ):
        response = await client.get("/v1/users/ana/inbox", headers=_bearer(bad))
        assert response.status_code == 401, (bad, response.text)
    assert (
        "expired"
        in (await client.get("/v1/users/ana/inbox", headers=_bearer(stale.token))).json()["error"][
            "message"
        ]
    )


async def test_server_keys_read_with_read_and_change_with_send(keyed: Any, db: Database) -> None:
    client, keys = keyed
    [anas] = await fill(db, "ana", 1)
    assert (await client.get("/v1/users/ana/inbox")).status_code == 401
    read = await client.get("/v1/users/ana/inbox", headers=_bearer(keys["read"]))
    assert read.status_code == 200
    mark = f"/v1/users/ana/inbox/{anas}/read"
    assert (await client.post(mark, headers=_bearer(keys["read"]))).status_code == 403
    assert (await client.post(mark, headers=_bearer(keys["send"]))).status_code == 200
    other = await client.get("/v1/users/ana/inbox", headers=_bearer(keys["tpl"]))
    assert other.status_code == 403
    minted = await client.post("/v1/users/ana/inbox-token", headers=_bearer(keys["read"]))
    assert minted.status_code == 403


async def test_a_backend_may_mint_the_token_itself(keyed: Any) -> None:
    """The recipe docs/inbox.md gives, with nothing of tidings but the secret."""
    client, _keys = keyed
    now = datetime.now(UTC)
    claims = {"sub": "ana", "aud": "tidings-inbox", "iat": now, "exp": now + timedelta(minutes=5)}
    token = "tdu_" + jwt.encode(claims, signing_key("test-secret"), algorithm="HS256")
    response = await client.get("/v1/users/ana/inbox", headers=_bearer(token))
    assert response.status_code == 200, response.text


async def test_cors_answers_the_allowed_origin_on_feed_routes_only(
    keyed: Any, allowed_origin: str
) -> None:
    client, _keys = keyed
    ask = {
        "Access-Control-Request-Method": "GET",
        "Access-Control-Request-Headers": "authorization",
    }
    allowed = await client.options("/v1/users/ana/inbox", headers={"Origin": allowed_origin, **ask})
    assert allowed.status_code == 200
    assert allowed.headers["access-control-allow-origin"] == allowed_origin
    evil = {"Origin": "https://evil.example", **ask}
    other = await client.options("/v1/users/ana/inbox", headers=evil)
    assert "access-control-allow-origin" not in other.headers
    elsewhere = await client.options(
        "/v1/users/ana/inbox-token", headers={"Origin": allowed_origin, **ask}
    )
    assert "access-control-allow-origin" not in elsewhere.headers
