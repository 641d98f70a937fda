"""The dead-letter queue: failed deliveries are listed and can be replayed."""

from __future__ import annotations

import uuid
from typing import Any

import httpx

from tests.helpers import email_to, eventually, post, put_type, running_dispatcher
from tidings.providers.testing import Script, ScriptedProvider
from tidings.service import Service


async def failed_delivery(client: httpx.AsyncClient, service: Service) -> dict[str, Any]:
    """One email delivery that ran out of attempts."""
    await put_type(client, retry={"maxAttempts": 2, "baseDelay": 0.01, "maxDelay": 0.02})
    accepted = (await post(client, email_to())).json()
    provider = ScriptedProvider(scripts={"ana@example.com": Script(transient_failures=99)})
    async with running_dispatcher(service, provider):

        async def failed() -> bool:
            shown = (await client.get(f"/v1/notifications/{accepted['id']}")).json()
            return bool(shown["deliveries"][0]["status"] == "FAILED")

        await eventually(failed)
    return accepted


async def test_exhausted_deliveries_are_listed_and_replayed(
    client: httpx.AsyncClient, service: Service
) -> None:
    accepted = await failed_delivery(client, service)
    delivery_id = accepted["deliveries"][0]["id"]
    dead = (await client.get("/v1/dead-letters")).json()
    assert [(d["id"], d["failureKind"], d["attempts"]) for d in dead] == [
        (delivery_id, "exhausted", 2)
    ]
    assert dead[0]["address"] == "a***@example.com"
    assert (await client.get("/v1/dead-letters", params={"kind": "poison"})).json() == []

    replayed = await client.post(f"/v1/deliveries/{delivery_id}/replay")
    assert replayed.status_code == 200 and replayed.json()["status"] == "PENDING"
    assert (await client.get("/v1/dead-letters")).json() == []
    provider = ScriptedProvider()  # the provider has recovered
    async with running_dispatcher(service, provider):
        await eventually(lambda: provider.completed)

        async def shown() -> dict[str, Any] | None:
            body = (await client.get(f"/v1/notifications/{accepted['id']}")).json()
            found: dict[str, Any] = body["deliveries"][0]
            return found if found["status"] == "SENT" else None

        delivery = await eventually(shown)
    replay_event = next(h for h in delivery["history"] if h["kind"] == "replayed")
    assert replay_event["detail"]["failureKind"] == "exhausted"
    assert delivery["attempts"] == 1


async def test_only_failed_deliveries_can_be_replayed(
    client: httpx.AsyncClient, service: Service
) -> None:
    await put_type(client)
    accepted = (await post(client, email_to())).json()
    pending = await client.post(f"/v1/deliveries/{accepted['deliveries'][0]['id']}/replay")
    assert pending.status_code == 409
    assert pending.json()["error"]["code"] == "not_failed"
    missing = await client.post(f"/v1/deliveries/{uuid.uuid4()}/replay")
    assert missing.status_code == 404
    assert (await client.get("/v1/dead-letters", params={"limit": 0})).status_code == 422
    assert (await client.get("/v1/dead-letters", params={"kind": "bogus"})).status_code == 422
