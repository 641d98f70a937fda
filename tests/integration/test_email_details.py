"""Email details production senders expect: a From per type (not one per account), a reply-to,
and copies (cc, bcc) per notification, through the real adapters to the simulator; and the
API's refusals where they cannot apply."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from tests.helpers import eventually, post, put_templates
from tests.integration.test_provider_effects import dispatching
from tidings.providers.sendgrid import SendGridAccount
from tidings.service import Service
from tidings.simulator.server import Simulator, SimulatorConfig


@pytest.fixture
async def sim(tmp_path: Path) -> AsyncIterator[Simulator]:
    async with Simulator(SimulatorConfig(credentials_dir=tmp_path / "credentials")) as simulator:
        yield simulator


def sendgrid(sim: Simulator) -> SendGridAccount:
    return SendGridAccount(
        api_key=SecretStr(sim.config.sendgrid_api_key),
        base_url=sim.url,
        from_email="noreply@tidings.example.com",
        from_name="Tidings",
        timeout=5,
    )


async def put_type(client: httpx.AsyncClient, name: str, **fields: Any) -> httpx.Response:
    body = {"category": "transactional", "priority": "normal", "channels": ["email"], **fields}
    return await client.put(f"/v1/types/{name}", json=body)


async def sent_payload(sim: Simulator, address: str) -> dict[str, Any]:
    async def found() -> dict[str, Any] | None:
        for received in sim.state("sendgrid").received:
            if received.address == address:
                return received.payload
        return None

    payload: dict[str, Any] = await eventually(found, within=10)
    return payload


async def test_a_type_sends_from_its_own_address_with_reply_to_and_copies(
    service: Service, client: httpx.AsyncClient, sim: Simulator
) -> None:
    sender = {"fromAddress": "billing@shop.example", "fromName": "Shop Billing"}
    answer = await put_type(client, "invoice", email={**sender, "replyTo": "help@shop.example"})
    assert answer.status_code == 201, answer.text
    assert answer.json()["email"] == {**sender, "replyTo": "help@shop.example"}
    await put_templates(client, "invoice", ("email",))
    await client.put("/v1/suppressions/email/gone@example.com", json={"reason": "manual"})
    details = {
        "replyTo": "ana.manager@example.com",
        "cc": ["ana.manager@example.com", "Gone@example.com", "ana@example.com"],
        "bcc": ["archive@shop.example"],
    }
    async with dispatching(service, {"sendgrid-sim": sendgrid(sim)}, {"email": ["sendgrid-sim"]}):
        body = {"type": "invoice", "to": {"email": "ana@example.com"}, "email": details}
        assert (await post(client, body)).status_code == 202
        payload = await sent_payload(sim, "ana@example.com")
        assert (
            await post(client, {"type": "invoice", "to": {"email": "bo@example.com"}})
        ).status_code == 202
        plain = await sent_payload(sim, "bo@example.com")

    assert payload["from"] == {"email": "billing@shop.example", "name": "Shop Billing"}
    assert payload["reply_to"] == {"email": "ana.manager@example.com"}  # the notification's
    [personalization] = payload["personalizations"]
    # The suppressed copy is dropped; the recipient is not copied to itself.
    assert personalization["cc"] == [{"email": "ana.manager@example.com"}]
    assert personalization["bcc"] == [{"email": "archive@shop.example"}]
    # Without details: the type's sender and reply-to, no copies.
    assert plain["reply_to"] == {"email": "help@shop.example"}
    assert "cc" not in plain["personalizations"][0]


async def test_without_a_type_sender_the_account_sends(
    service: Service, client: httpx.AsyncClient, sim: Simulator
) -> None:
    await put_type(client, "receipt")
    await put_templates(client, "receipt", ("email",))
    async with dispatching(service, {"sendgrid-sim": sendgrid(sim)}, {"email": ["sendgrid-sim"]}):
        await post(client, {"type": "receipt", "to": {"email": "ana@example.com"}})
        payload = await sent_payload(sim, "ana@example.com")
    assert payload["from"] == {"email": "noreply@tidings.example.com", "name": "Tidings"}
    assert "reply_to" not in payload


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"email": {"fromName": "No Address"}}, "email"),
        ({"email": {"fromAddress": "not an address"}}, "email.fromAddress"),
        (
            {"email": {"fromAddress": "a@example.com", "fromName": "Evil\r\nBcc: x@y.z"}},
            "email.fromName",
        ),
    ],
)
async def test_a_type_sender_is_checked(
    client: httpx.AsyncClient, body: dict[str, Any], field: str
) -> None:
    answer = await put_type(client, "bad.sender", **body)
    assert answer.status_code == 422, answer.text
    assert field in answer.text


async def test_details_are_refused_where_they_cannot_apply(client: httpx.AsyncClient) -> None:
    await put_type(client, "news", category="marketing")
    await put_templates(client, "news", ("email",))
    await client.put(
        "/v1/types/code",
        json={"category": "transactional", "priority": "high", "channels": ["sms"]},
    )
    copies = await post(
        client,
        {"type": "news", "to": {"email": "a@example.com"}, "email": {"cc": ["b@example.com"]}},
    )
    no_email = await post(
        client,
        {"type": "code", "to": {"phone": "+15550001234"}, "email": {"replyTo": "r@example.com"}},
    )
    too_many = await post(
        client,
        {
            "type": "news",
            "to": {"email": "a@example.com"},
            "email": {"bcc": [f"c{i}@example.com" for i in range(11)]},
        },
    )
    assert copies.status_code == 422 and copies.json()["error"]["field"] == "email.cc"
    assert no_email.status_code == 422 and no_email.json()["error"]["field"] == "email"
    assert too_many.status_code == 422 and "email.bcc" in too_many.text
    # Marketing may still set where replies go.
    reply = await post(
        client,
        {"type": "news", "to": {"email": "a@example.com"}, "email": {"replyTo": "r@example.com"}},
    )
    assert reply.status_code == 202, reply.text
