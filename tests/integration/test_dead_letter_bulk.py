"""Dead letters filtered by type, kind, error and time, and replayed in bulk (issue 29)."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from tests.helpers import email_to, post, put_type
from tidings.clock import utcnow
from tidings.service import Service
from tidings.store.schema import delivery


async def dead(
    client: httpx.AsyncClient, service: Service, type: str, kind: str, error: str, age: float
) -> str:
    """A delivery of ``type`` FAILED ``age`` hours ago with ``kind`` and ``error``."""
    accepted = (await post(client, {**email_to(), "type": type})).json()
    delivery_id: str = accepted["deliveries"][0]["id"]
    async with service.db.engine.begin() as conn:
        await conn.execute(
            sa.update(delivery)
            .where(delivery.c.id == uuid.UUID(delivery_id))
            .values(
                status="FAILED",
                failure_kind=kind,
                last_error=error,
                attempts=3,
                updated_at=utcnow() - timedelta(hours=age),
            )
        )
    return delivery_id


async def listed(client: httpx.AsyncClient, **params: Any) -> list[str]:
    answer = await client.get("/v1/dead-letters", params=params)
    assert answer.status_code == 200, answer.text
    return [d["id"] for d in answer.json()]


async def test_filters_then_a_bulk_replay_of_what_they_match(
    client: httpx.AsyncClient, service: Service
) -> None:
    await put_type(client, "order.confirmed", channels=("email",))
    await put_type(client, "password.reset", channels=("email",))
    old = await dead(client, service, "order.confirmed", "exhausted", "503 from provider", 5)
    new = await dead(client, service, "order.confirmed", "exhausted", "503 from provider", 1)
    poison = await dead(client, service, "order.confirmed", "poison", "template: name", 1)
    reset = await dead(client, service, "password.reset", "exhausted", "timeout", 1)

    assert set(await listed(client)) == {old, new, poison, reset}
    assert set(await listed(client, type="password.reset")) == {reset}
    assert set(await listed(client, kind="poison")) == {poison}
    assert set(await listed(client, error="503")) == {old, new}
    since = (utcnow() - timedelta(hours=2)).isoformat()
    assert set(await listed(client, error="503", **{"from": since})) == {new}
    assert await listed(client, error="50%") == []  # a LIKE wildcard matches itself only

    body = {"type": "order.confirmed", "kind": ["exhausted"], "error": "503"}
    replayed = await client.post("/v1/dead-letters/replay", json=body)
    assert replayed.status_code == 200, replayed.text
    assert replayed.json() == {"replayed": 2, "changed": 0}
    assert set(await listed(client)) == {poison, reset}
    shown = (await client.get("/v1/dead-letters", params={"kind": "poison"})).json()
    assert shown[0]["id"] == poison
    again = await client.post("/v1/dead-letters/replay", json=body)
    assert again.json() == {"replayed": 0, "changed": 0}
    limited = await client.post("/v1/dead-letters/replay", json={"limit": 1})
    assert limited.json() == {"replayed": 1, "changed": 0}
    assert len(await listed(client)) == 1


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"type": "t" * 101}, "type"),
        ({"error": ""}, "error"),
        ({"from": "2026-12-01T00:00:00"}, "from"),
        ({"from": "2026-12-02T00:00:00Z", "to": "2026-12-01T00:00:00Z"}, "to"),
        ({"kind": "lost"}, "kind"),
    ],
)
async def test_bad_filters_are_422_naming_the_field(
    client: httpx.AsyncClient, params: dict[str, Any], field: str
) -> None:
    answer = await client.get("/v1/dead-letters", params=params)
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["field"].split(".")[0] == field
    body = {**params, "kind": [params["kind"]]} if "kind" in params else params
    bulk = await client.post("/v1/dead-letters/replay", json=body)
    assert bulk.status_code == 422, bulk.text
    assert bulk.json()["error"]["field"].split(".")[0] == field


async def test_a_bulk_replay_is_bounded(client: httpx.AsyncClient) -> None:
    answer = await client.post("/v1/dead-letters/replay", json={"limit": 1001})
    assert answer.status_code == 422 and answer.json()["error"]["field"] == "limit"
