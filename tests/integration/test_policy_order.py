"""The order of the checks (docs/architecture.md, Policy check order): the first that applies gives
the reason, and
nothing that is not sent uses up a frequency cap."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import httpx
import sqlalchemy as sa

from tests.helpers import eventually, post, put_type, running_dispatcher
from tidings.clock import utcnow
from tidings.providers.testing import ScriptedProvider
from tidings.service import Service
from tidings.store.schema import delivery


async def shown(client: httpx.AsyncClient, body: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = (await client.get(f"/v1/notifications/{body['id']}")).json()
    return found["deliveries"][0]


async def test_preference_before_suppression(client: httpx.AsyncClient) -> None:
    await put_type(client, "promo", category="marketing", priority="low", channels=("email",))
    await client.put(
        "/v1/users/fan/preferences", json={"categories": {"marketing": {"email": False}}}
    )
    await client.put("/v1/suppressions/email/fan@example.com")
    body = (
        await post(client, {"type": "promo", "userId": "fan", "to": {"email": "fan@example.com"}})
    ).json()
    assert (await shown(client, body))["skipReason"] == "preference_off"


async def test_held_or_expired_deliveries_use_no_cap(
    client: httpx.AsyncClient, service: Service
) -> None:
    service.settings.frequency_caps = {"marketing": 1}
    await put_type(
        client, "flash.sale", category="marketing", priority="low", channels=("email",), ttl=60
    )
    to = {"email": "fan@example.com"}
    stale = (await post(client, {"type": "flash.sale", "userId": "fan", "to": to})).json()
    async with service.db.engine.begin() as conn:
        old = utcnow() - timedelta(minutes=5)
        await conn.execute(sa.update(delivery).values(created_at=old))
    fresh = (await post(client, {"type": "flash.sale", "userId": "fan", "to": to})).json()
    provider = ScriptedProvider()
    async with running_dispatcher(service, provider):
        await eventually(lambda: provider.completed)
        await asyncio.sleep(0.3)
    assert (await shown(client, stale))["status"] == "EXPIRED"
    assert (await shown(client, fresh))["status"] == "SENT"  # the expired one took no slot
    assert len(provider.completed) == 1
