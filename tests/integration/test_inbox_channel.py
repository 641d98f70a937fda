"""The ``inbox`` channel: a delivery stores one message in its user's feed (no provider),
through preferences and caps; quiet hours do not hold it; the retention pass deletes old
messages."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from tests.helpers import eventually, post, put_type, running_dispatcher
from tidings.background.retention import RetentionPlan, maintain_every
from tidings.ids import new_id
from tidings.providers.testing import ScriptedProvider
from tidings.service import Service
from tidings.settings import Settings
from tidings.store import inbox
from tidings.store.engine import Database
from tidings.store.schema import inbox_message

INBOX_TEMPLATE = {
    "subject": "Order {{ data.order }} shipped",
    "text": "It leaves today, <b>{{ data.name }}</b>.",
    "data": {"actionUrl": "https://shop.example/orders/{{ data.order }}"},
}


async def inbox_type(
    client: httpx.AsyncClient, name: str = "order.shipped", category: str = "transactional"
) -> None:
    await put_type(client, name, category=category, channels=("inbox", "push"), templates=False)
    for channel, parts in (("inbox", INBOX_TEMPLATE), ("push", {"text": "shipped"})):
        response = await client.put(f"/v1/templates/{name}/{channel}/en", json=parts)
        assert response.status_code in (200, 201), response.text


async def register(client: httpx.AsyncClient, user: str, **profile: Any) -> None:
    response = await client.put(f"/v1/users/{user}", json=profile)
    assert response.status_code in (200, 201), response.text


async def statuses(client: httpx.AsyncClient, notification_id: str) -> dict[str, str]:
    shown = (await client.get(f"/v1/notifications/{notification_id}")).json()
    return {d["channel"]: d["status"] for d in shown["deliveries"]}


async def test_an_inbox_delivery_stores_the_rendered_message_and_is_sent(
    client: httpx.AsyncClient, service: Service
) -> None:
    await inbox_type(client)
    await register(client, "ana")
    data = {"order": "A-17", "name": "Ana"}
    body = {"type": "order.shipped", "userId": "ana", "channels": ["inbox"], "data": data}
    accepted = (await post(client, body)).json()
    provider = ScriptedProvider()
    async with running_dispatcher(service, provider):
        sent = await eventually(
            lambda: _status_is(client, accepted["id"], {"inbox": "SENT"}), within=15
        )
    assert sent
    assert provider.calls == []  # no provider is called for the inbox
    page = await inbox.page(service.db, "ana", "all", 10, None)
    [message] = page.items
    assert (message.subject, message.text) == ("Order A-17 shipped", data_text("Ana"))
    assert message.data == {"actionUrl": "https://shop.example/orders/A-17"}
    assert str(message.notification_id) == accepted["id"]
    assert (message.type, message.category, message.user_id) == (
        "order.shipped",
        "transactional",
        "ana",
    )
    shown = (await client.get(f"/v1/notifications/{accepted['id']}")).json()
    assert shown["deliveries"][0]["provider"] == "inbox"
    assert await inbox.page(service.db, "bob", "all", 10, None) == inbox.Page([], None)


def data_text(name: str) -> str:
    # Stored as rendered: escaping is the component's work when it shows it (docs/inbox.md).
    return f"It leaves today, <b>{name}</b>."


async def _status_is(client: httpx.AsyncClient, notification_id: str, want: dict[str, str]) -> bool:
    return await statuses(client, notification_id) == want


async def test_the_inbox_is_a_registered_users(client: httpx.AsyncClient) -> None:
    await inbox_type(client)
    body = {"type": "order.shipped", "userId": "ghost", "channels": ["inbox"], "data": {}}
    refused = await post(client, body)
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"]["code"] == "unknown_user"


async def test_preferences_switch_the_inbox_off_like_any_channel(
    client: httpx.AsyncClient, service: Service
) -> None:
    await inbox_type(client, "promo", category="marketing")
    await register(client, "ana")
    choices = {"marketing": {"inbox": False}}
    assert (await client.put("/v1/users/ana/preferences", json=choices)).status_code == 200
    body = {
        "type": "promo",
        "userId": "ana",
        "channels": ["inbox"],
        "data": {"order": 1, "name": "A"},
    }
    accepted = (await post(client, body)).json()
    async with running_dispatcher(service, ScriptedProvider()):
        await eventually(lambda: _status_is(client, accepted["id"], {"inbox": "SKIPPED"}))
    shown = (await client.get(f"/v1/notifications/{accepted['id']}")).json()
    assert shown["deliveries"][0]["skipReason"] == "preference_off"
    assert (await inbox.counts(service.db, "ana")).total == 0


async def test_quiet_hours_hold_the_push_but_not_the_inbox(
    client: httpx.AsyncClient, service: Service
) -> None:
    await inbox_type(client, "promo", category="marketing")
    await register(client, "owl")
    now = datetime.now(UTC)
    window = {"from": (now - timedelta(hours=1)).strftime("%H:%M")}
    window["to"] = (now + timedelta(hours=2)).strftime("%H:%M")
    body = {"quietHours": window, "timezone": "UTC"}
    assert (await client.put("/v1/users/owl/preferences", json=body)).status_code == 200
    notification = {
        "type": "promo",
        "userId": "owl",
        "to": {"deviceTokens": ["tok-owl-0000000000000"]},
        "data": {"order": 2, "name": "Owl"},
    }
    accepted = (await post(client, notification)).json()
    provider = ScriptedProvider()
    async with running_dispatcher(service, provider):
        await eventually(
            lambda: _status_is(client, accepted["id"], {"inbox": "SENT", "push": "PENDING"})
        )
        await asyncio.sleep(0.3)
    assert provider.calls == []  # the push waits for the morning
    assert (await inbox.counts(service.db, "owl")).unread == 1


async def test_the_daily_cap_counts_inbox_messages(
    client: httpx.AsyncClient, service: Service
) -> None:
    await inbox_type(client, "promo", category="marketing")
    await register(client, "ana")
    ids = []
    for order in range(4):  # the marketing cap is 3 a day
        body = {
            "type": "promo",
            "userId": "ana",
            "channels": ["inbox"],
            "data": {"order": order, "name": "A"},
        }
        ids.append((await post(client, body)).json()["id"])
    async with running_dispatcher(service, ScriptedProvider()):

        async def done() -> list[str]:
            found = [(await statuses(client, i))["inbox"] for i in ids]
            return found if "PENDING" not in found and "SENDING" not in found else []

        final = await eventually(done, within=15)
    assert sorted(final) == ["SENT", "SENT", "SENT", "SKIPPED"]
    assert (await inbox.counts(service.db, "ana")).total == 3


def _new(delivery_id: uuid.UUID, user: str = "ana") -> inbox.NewMessage:
    return inbox.NewMessage(
        delivery_id, new_id(), user, "promo", "marketing", "Hi", "Body", {"k": "v"}
    )


async def test_a_send_repeated_stores_the_message_once(db: Database) -> None:
    delivery_id = new_id()
    now = datetime.now(UTC)
    first = await inbox.store(db, _new(delivery_id), now)
    again = await inbox.store(db, _new(delivery_id), now)
    assert first is not None and again is None
    assert (await inbox.counts(db, "ana")).total == 1


async def test_retention_deletes_messages_older_than_inbox_retention_days(
    db: Database,
) -> None:
    now = datetime.now(UTC)
    old, kept = (
        await _stored_at(db, now - timedelta(days=91)),
        await _stored_at(db, now - timedelta(days=89)),
    )
    assert await inbox.prune(db, now.date() - timedelta(days=90)) == 1
    async with db.engine.connect() as conn:
        left = (await conn.execute(sa.select(inbox_message.c.id))).scalars().all()
    assert left == [kept] and old not in left


async def test_the_retention_pass_prunes_the_inbox(db: Database) -> None:
    now = datetime.now(UTC)
    await _stored_at(db, now - timedelta(days=11))
    kept = await _stored_at(db, now - timedelta(days=9))
    plan = RetentionPlan(30, 7, 7, inbox_days=10, interval=0.01)
    stop = asyncio.Event()
    task = asyncio.create_task(maintain_every(plan, db, stop))
    try:

        async def only_kept() -> bool:
            return await _ids(db) == [kept]

        await eventually(only_kept, within=10)
    finally:
        stop.set()
        await task


async def _ids(db: Database) -> list[uuid.UUID]:
    async with db.engine.connect() as conn:
        return list((await conn.execute(sa.select(inbox_message.c.id))).scalars().all())


async def _stored_at(db: Database, at: datetime) -> uuid.UUID:
    """A message as stored at ``at`` (its id made in that millisecond, as new_id would)."""
    millis = int(at.timestamp() * 1000)
    message_id = uuid.UUID(
        int=(millis << 80) | (0x7 << 76) | (2 << 62) | new_id().int & ((1 << 62) - 1)
    )
    row = {
        "id": message_id,
        "delivery_id": new_id(),
        "notification_id": new_id(),
        "user_id": "ana",
        "type": "promo",
        "category": "marketing",
        "subject": None,
        "text": "old",
        "data": {},
        "created_at": at,
    }
    async with db.engine.begin() as conn:
        await conn.execute(sa.insert(inbox_message).values(row))
    return message_id


def test_the_inbox_has_no_provider_to_configure(tmp_path: Any) -> None:
    with pytest.raises(ValueError, match="inbox channel has no provider"):
        Settings(providers={"inbox": "sink"})
    assert Settings().chain("inbox") == ["inbox"]
    assert Settings().inbox.retention_days == 90
