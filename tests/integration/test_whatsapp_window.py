"""WhatsApp's 24-hour customer service window: a user's message (Meta's ``messages``
webhook, signed, posted by the simulated Cloud API as the user writes) opens it; free text
goes out only inside it, and outside it fails permanently before any request to Meta, while
a template goes anyway. The simulator is as strict about the window, so both sides agree:
what tidings sends, the simulator takes. Meta's GET verification handshake is answered with
the challenge for the account's verify token only."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers import eventually, post
from tests.integration.test_whatsapp_loop import ORDER, PUBLIC, register, serving
from tests.integration.test_whatsapp_loop import settings as settings
from tidings.providers.whatsapp import WhatsAppAccount
from tidings.providers.whatsapp.receiver import signature
from tidings.service import Service
from tidings.simulator.behaviour import Behaviour
from tidings.simulator.server import Simulator, SimulatorConfig
from tidings.store import whatsapp_windows

HOURS = 3600.0


async def send(client: httpx.AsyncClient, kind: str, number: str) -> str:
    body = {"type": kind, "to": {"whatsapp": number}, "data": {"order": "42"}}
    answer = await post(client, body)
    assert answer.status_code == 202, answer.text
    return str(answer.json()["id"])


async def final(client: httpx.AsyncClient, notification_id: str) -> dict[str, Any] | None:
    """The delivery once it is DELIVERED or FAILED."""
    [item] = (await client.get(f"/v1/notifications/{notification_id}")).json()["deliveries"]
    return item if item["status"] in ("DELIVERED", "FAILED") else None


async def window_of(service: Service, number: str) -> Any:
    return (await whatsapp_windows.last_inbound(service.db, [number])).get(number)


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
async def test_free_text_only_inside_the_window_and_templates_always(
    service: Service, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    config = SimulatorConfig(
        credentials_dir=tmp_path / "credentials",
        behaviours={"whatsapp": Behaviour(report_delay_ms=20)},
        whatsapp_webhook_url=f"{PUBLIC}/v1/webhooks/whatsapp/wa",
    )
    await register(client, "order", {"data": ORDER})
    await register(client, "chat", {"text": "Your order {{ data.order }} shipped."})
    inside, late, never = "+5511900000011", "+5511900000012", "+5511900000013"
    async with Simulator(config) as sim, serving(service, sim):
        whatsapp = sim.http["whatsapp"]
        whatsapp.user_writes(inside[1:], "where is my order?")
        # Meta delivers this one late: the user wrote 25 hours ago, the window is shut.
        whatsapp.user_writes(late[1:], "hello", at=time.time() - 25 * HOURS)
        await eventually(lambda: window_of(service, inside), within=10)
        await eventually(lambda: window_of(service, late), within=10)

        answered = await send(client, "chat", inside)
        shut = await send(client, "chat", late)
        unknown = await send(client, "chat", never)
        template = await send(client, "order", late)
        results = {}
        for name, nid in [("in", answered), ("late", shut), ("never", unknown), ("t", template)]:
            results[name] = await eventually(lambda n=nid: final(client, n), within=20)

    assert results["in"]["status"] == "DELIVERED"
    assert results["t"]["status"] == "DELIVERED"
    for name in ("late", "never"):
        failed = results[name]
        assert (failed["status"], failed["failureKind"]) == ("FAILED", "permanent"), failed
        assert "24-hour customer service window" in failed["lastError"]
    state = sim.state("whatsapp")
    sent = [(r.address, r.payload["type"]) for r in state.received]
    # Free text reached the simulator only inside the window; nothing was refused by it.
    assert sorted(sent) == [("5511900000011", "text"), ("5511900000012", "template")]
    assert state.counts["reports_failed"] == 0


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
async def test_unsigned_inbound_opens_no_window(
    service: Service, client: httpx.AsyncClient
) -> None:
    account = WhatsAppAccount(phone_number_id="1065403522", access_token="t", app_secret="s")
    service.settings = service.settings.model_copy(update={"accounts": {"wa": account}})
    message = {"from": "5511900000021", "id": "wamid.x", "timestamp": str(int(time.time()))}
    value = {"messaging_product": "whatsapp", "messages": [message]}
    body = {"object": "whatsapp_business_account", "entry": [{"changes": [{"value": value}]}]}
    raw = httpx.Request("POST", "/", json=body).read()
    forged = {"X-Hub-Signature-256": signature("not-the-secret", raw)}
    answer = await client.post("/v1/webhooks/whatsapp/wa", content=raw, headers=forged)
    assert answer.status_code == 401
    assert await window_of(service, "+5511900000021") is None
    signed = {"X-Hub-Signature-256": signature("s", raw), "content-type": "application/json"}
    answer = await client.post("/v1/webhooks/whatsapp/wa", content=raw, headers=signed)
    assert (answer.status_code, answer.json()["inbound"]) == (200, 1)
    assert set(await window_of(service, "+5511900000021")) == {"wa"}


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
async def test_meta_verification_handshake(service: Service, client: httpx.AsyncClient) -> None:
    account = WhatsAppAccount(phone_number_id="1065403522", access_token="t", verify_token="v1")
    bare = account.model_copy(update={"verify_token": None})
    accounts = {"wa": account, "bare": bare}
    service.settings = service.settings.model_copy(update={"accounts": accounts})
    query = {"hub.mode": "subscribe", "hub.verify_token": "v1", "hub.challenge": "1158201444"}
    answer = await client.get("/v1/webhooks/whatsapp/wa", params=query)
    assert (answer.status_code, answer.text) == (200, "1158201444")
    wrong = await client.get("/v1/webhooks/whatsapp/wa", params=query | {"hub.verify_token": "x"})
    assert wrong.status_code == 403
    assert (await client.get("/v1/webhooks/whatsapp/bare", params=query)).status_code == 403
    assert (await client.get("/v1/webhooks/whatsapp/nobody", params=query)).status_code == 404
    assert (await client.get("/v1/webhooks/sendgrid/wa", params=query)).status_code == 404
