"""GET /v1/events (docs/events.md): every status change and tracking event, written by the
database in the transaction of the change, read in the log's order after a stable cursor."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from tests.helpers import email_to, eventually, post, put_type, running_dispatcher
from tests.integration.test_api_keys import add_key, http
from tidings.api.app import create_app
from tidings.api.auth import ALL_SCOPES, Scope
from tidings.providers.sink import SinkProvider
from tidings.providers.testing import Script, ScriptedProvider
from tidings.service import Service
from tidings.store import events


async def all_events(client: httpx.AsyncClient, **params: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    after = None
    while True:
        query = {**params, **({"after": after} if after else {})}
        page = (await client.get("/v1/events", params=query)).json()
        found += page["events"]
        if not page["events"] and not page["more"]:
            return found
        after = page["next"]


async def test_status_changes_and_tracking_events_are_in_the_feed(
    client: httpx.AsyncClient, service: Service
) -> None:
    await put_type(client, retry={"maxAttempts": 1})
    await client.put("/v1/suppressions/email/gone@example.com", json={"reason": "manual"})
    skipped = (await post(client, email_to("gone@example.com"))).json()
    sent = (await post(client, email_to("ana@example.com"))).json()
    failed = (await post(client, email_to("bad@example.com"))).json()
    provider = ScriptedProvider(scripts={"bad@example.com": Script(permanent=True)})
    async with running_dispatcher(service, provider):
        await eventually(lambda: len(provider.completed) == 2)
        kinds = await eventually(lambda: _types_of(client), within=10)
    assert kinds == {
        skipped["deliveries"][0]["id"]: ["delivery.skipped"],
        sent["deliveries"][0]["id"]: ["delivery.sent"],
        failed["deliveries"][0]["id"]: ["delivery.failed"],
    }
    events = await all_events(client)
    first = events[0]
    assert first["data"]["skipReason"] == "suppressed"
    assert first["data"]["notificationId"] == skipped["id"]
    assert {e["data"]["channel"] for e in events} == {"email"}
    only_sent = await all_events(client, types="delivery.sent")
    assert [e["type"] for e in only_sent] == ["delivery.sent"]
    bad = await client.get("/v1/events", params={"types": "delivery.nope"})
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "types"
    forged = await client.get("/v1/events", params={"after": "!!"})
    assert forged.status_code == 422 and forged.json()["error"]["field"] == "after"


async def _types_of(client: httpx.AsyncClient) -> dict[str, list[str]] | None:
    events = await all_events(client)
    by_delivery: dict[str, list[str]] = {}
    for found in events:
        by_delivery.setdefault(found["data"]["deliveryId"], []).append(found["type"])
    return by_delivery if len(by_delivery) == 3 else None


async def test_an_open_and_a_click_are_events_of_their_delivery(
    client: httpx.AsyncClient, service: Service
) -> None:
    kind = {"category": "marketing", "priority": "normal", "channels": ["email"]}
    assert (await client.put("/v1/types/promo", json=kind)).status_code == 201
    html = '<a href="https://shop.example/x">x</a>'
    template = {"subject": "Hi", "text": "Hi", "html": html}
    assert (await client.put("/v1/templates/promo/email/en", json=template)).status_code == 201
    accepted = await post(client, {"type": "promo", "to": {"email": "ana@example.com"}})
    delivery = accepted.json()["deliveries"][0]["id"]
    async with running_dispatcher(service, SinkProvider(service.settings.outbox_dir)):
        await eventually(lambda: _types_of_one(client, delivery, 1))
    body = (service.settings.outbox_dir / "email" / f"{delivery}.json").read_text()
    pixel = re.search(r"/t/o/([A-Za-z0-9._-]+)", body)
    link = re.search(r"/t/c/([A-Za-z0-9._-]+)", body)
    assert pixel and link
    await client.get(f"/t/o/{pixel.group(1)}", headers={"User-Agent": "Thunderbird/128"})
    await client.get(f"/t/c/{link.group(1)}", headers={"User-Agent": "Thunderbird/128"})
    events = await eventually(lambda: _types_of_one(client, delivery, 3))
    assert [e["type"] for e in events] == ["delivery.sent", "delivery.opened", "delivery.clicked"]
    assert events[2]["data"]["url"] == "https://shop.example/x"


async def _types_of_one(
    client: httpx.AsyncClient, delivery: str, count: int
) -> list[dict[str, Any]] | None:
    events = [e for e in await all_events(client) if e["data"].get("deliveryId") == delivery]
    return events if len(events) >= count else None


async def test_a_namespace_reads_only_its_own_events(service: Service) -> None:
    app: FastAPI = create_app(service)
    team = await add_key(app, "team", ALL_SCOPES, namespace="a")
    other = await add_key(app, "other", [Scope.READ], namespace="b")
    async with http(app, team) as a, http(app, other) as b:
        await put_type(a)
        await a.put("/v1/suppressions/email/gone@example.com", json={"reason": "manual"})
        assert (await post(a, email_to("gone@example.com"))).status_code == 202

        # PostgreSQL shows an event once every older transaction on the server has ended.
        async def seen() -> list[str] | None:
            return [e["type"] for e in await all_events(a)] or None

        assert await eventually(seen) == ["delivery.skipped"]
        assert await all_events(b) == []


@pytest.mark.timeout(120)
async def test_pages_hold_every_event_once_while_new_ones_are_written(
    client: httpx.AsyncClient, service: Service
) -> None:
    await put_type(client)
    total = 120
    expected: set[str] = set()

    async def write() -> None:
        for start in range(0, total, 10):
            answers = await asyncio.gather(
                *(post(client, email_to(f"u{n}@example.com")) for n in range(start, start + 10))
            )
            expected.update(a.json()["deliveries"][0]["id"] for a in answers)
            await asyncio.sleep(0.02)

    seen: list[str] = []
    cursors: list[str] = []

    async def read() -> None:
        after = None
        deadline = asyncio.get_running_loop().time() + 60
        while len(seen) < total and asyncio.get_running_loop().time() < deadline:
            params = {"limit": 7, **({"after": after} if after else {})}
            page = (await client.get("/v1/events", params=params)).json()
            seen.extend(e["data"]["deliveryId"] for e in page["events"])
            cursors.extend(e["id"] for e in page["events"])
            after = page["next"]
            if not page["events"]:
                await asyncio.sleep(0.02)

    provider = ScriptedProvider()
    async with running_dispatcher(service, provider):
        await asyncio.gather(write(), read())
    assert len(cursors) == len(set(cursors)), "an event was returned twice"
    assert len(seen) == len(set(seen)) == total
    assert set(seen) == expected


async def test_a_filter_for_rare_events_moves_on_over_the_others(
    client: httpx.AsyncClient, service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page reads a bounded stretch of the log: with a filter few events match, it answers
    with a cursor past what it read and ``more``, and every match is found once."""
    monkeypatch.setattr(events, "SCAN", 3)
    monkeypatch.setattr(events, "PAGE_SCANS", 2)
    await put_type(client)
    await client.put("/v1/suppressions/email/gone@example.com", json={"reason": "manual"})
    for _ in range(12):  # twelve skipped: more than the two windows of three one page reads
        assert (await post(client, email_to("gone@example.com"))).status_code == 202
    sent = (await post(client, email_to("ana@example.com"))).json()
    async with running_dispatcher(service, SinkProvider(service.settings.outbox_dir)):
        await eventually(lambda: _has(client, "delivery.sent"))
    first = (await client.get("/v1/events", params={"types": "delivery.sent"})).json()
    assert first["events"] == [] and first["more"] is True and first["next"]
    found, after, pages = [], first["next"], 1
    while True:
        page = (
            await client.get("/v1/events", params={"types": "delivery.sent", "after": after})
        ).json()
        pages += 1
        found += page["events"]
        after = page["next"]
        if not page["more"]:
            break
    assert [e["data"]["notificationId"] for e in found] == [sent["id"]]
    assert pages >= 2
    # Read to its end, a page with nothing new keeps its cursor.
    again = await client.get("/v1/events", params={"types": "delivery.sent", "after": after})
    assert again.json() == {"events": [], "next": after, "more": False}


async def _has(client: httpx.AsyncClient, kind: str) -> bool:
    return any(e["type"] == kind for e in await all_events(client))
