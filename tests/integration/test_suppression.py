"""The suppression list: nothing is ever sent to a suppressed address (docs/architecture.md, Policy
check order)."""

from __future__ import annotations

import httpx

from tests.helpers import email_to, eventually, post, put_type, running_dispatcher
from tidings.providers.testing import ScriptedProvider
from tidings.service import Service


async def test_put_get_delete_a_suppression(client: httpx.AsyncClient) -> None:
    put = await client.put("/v1/suppressions/email/Ana@Example.com", json={"reason": "bounce"})
    assert put.status_code == 200, put.text
    assert (put.json()["address"], put.json()["reason"]) == ("ana@example.com", "bounce")
    shown = await client.get("/v1/suppressions/email/ana@example.COM")
    assert shown.status_code == 200 and shown.json()["reason"] == "bounce"
    assert (await client.put("/v1/suppressions/sms/+5511912345678")).json()["reason"] == "manual"
    assert (await client.delete("/v1/suppressions/email/ana@example.com")).status_code == 204
    assert (await client.get("/v1/suppressions/email/ana@example.com")).status_code == 404
    assert (await client.delete("/v1/suppressions/email/ana@example.com")).status_code == 404


async def test_bad_suppression_input_is_a_4xx(client: httpx.AsyncClient) -> None:
    unknown_channel = await client.put("/v1/suppressions/fax/123")
    assert unknown_channel.status_code == 422
    assert unknown_channel.json()["error"]["field"] == "channel"
    empty_reason = await client.put("/v1/suppressions/email/a@example.com", json={"reason": ""})
    assert empty_reason.status_code == 422


async def test_a_suppressed_address_is_skipped_at_accept(client: httpx.AsyncClient) -> None:
    await put_type(client)
    await client.put("/v1/suppressions/email/ana@example.com", json={"reason": "complaint"})
    response = await post(
        client,
        {"type": "order.confirmed", "to": {"email": "ANA@example.com", "phone": "+5511912345678"}},
    )
    assert response.status_code == 202
    statuses = {d["channel"]: d["status"] for d in response.json()["deliveries"]}
    assert statuses == {"email": "SKIPPED", "sms": "PENDING", "push": "SKIPPED"}
    shown = (await client.get(f"/v1/notifications/{response.json()['id']}")).json()
    email = next(d for d in shown["deliveries"] if d["channel"] == "email")
    assert email["skipReason"] == "suppressed"


async def test_suppressing_after_accept_stops_the_queued_send(
    client: httpx.AsyncClient, service: Service
) -> None:
    await put_type(client)
    queued = [await post(client, email_to(f"fan{i}@example.com")) for i in range(30)]
    await client.put("/v1/suppressions/email/fan7@example.com", json={"reason": "bounce"})
    provider = ScriptedProvider()
    async with running_dispatcher(service, provider):
        await eventually(lambda: len(provider.completed) >= 29, within=15)

        async def skipped() -> dict[str, object] | None:
            shown = (await client.get(f"/v1/notifications/{queued[7].json()['id']}")).json()
            delivery: dict[str, object] = shown["deliveries"][0]
            return delivery if delivery["status"] == "SKIPPED" else None

        delivery = await eventually(skipped)
    assert "fan7@example.com" not in {call.address for call in provider.calls}
    assert len(provider.calls) == 29
    assert (delivery["skipReason"], delivery["attempts"]) == ("suppressed", 0)
