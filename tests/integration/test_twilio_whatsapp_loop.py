"""WhatsApp through Twilio's sender, the whole loop against the simulated Twilio: a user's
message (Twilio's incoming-message webhook, signed X-Twilio-Signature) opens the 24-hour
window, free text inside it is delivered and read (status callbacks, signed), a template
(ContentSid) goes whatever the window, free text to a number that never wrote fails before
any request, and a number that is not on WhatsApp (63024) fails and is suppressed."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from tests.helpers import eventually
from tests.integration.test_whatsapp_loop import ORDER, PUBLIC, register
from tests.integration.test_whatsapp_loop import settings as settings
from tests.integration.test_whatsapp_window import final, send, window_of
from tidings.api.app import create_app
from tidings.assembly import assemble_dispatcher
from tidings.providers.twilio_whatsapp import TwilioWhatsAppAccount
from tidings.service import Service, providers_from_settings
from tidings.simulator.behaviour import Behaviour
from tidings.simulator.server import Simulator, SimulatorConfig

CONTENT = "HX0123456789abcdef0123456789abcdef"
TOKEN = "twilio-token-of-the-test"


@contextlib.asynccontextmanager
async def serving(service: Service, sim: Simulator) -> AsyncIterator[None]:
    """tidings' API on PUBLIC (Twilio's callbacks come to it) and a dispatcher."""
    account = TwilioWhatsAppAccount(
        account_sid=sim.config.twilio_account_sid,
        auth_token=TOKEN,
        from_number=sim.config.twilio_whatsapp_senders[0],
        content_sids={"order_update:pt_BR": CONTENT},
        base_url=sim.url,
        timeout=5,
    )
    service.settings = service.settings.model_copy(
        update={"accounts": {"tw": account}, "providers": {"whatsapp": ["tw"]}}
    )
    port = int(PUBLIC.rsplit(":", 1)[1])
    config = uvicorn.Config(create_app(service), port=port, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    api = asyncio.create_task(server.serve())
    providers = providers_from_settings(service.settings)
    stop = asyncio.Event()
    dispatching = asyncio.create_task(assemble_dispatcher(service, providers).run(stop))
    try:
        await eventually(lambda: server.started)
        yield
    finally:
        stop.set()
        await asyncio.wait_for(dispatching, timeout=30)
        await providers.close()
        server.should_exit = True
        await api


async def history(client: httpx.AsyncClient, notification_id: str) -> list[str]:
    [item] = (await client.get(f"/v1/notifications/{notification_id}")).json()["deliveries"]
    return [entry["kind"] for entry in item["history"]]


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
async def test_twilio_whatsapp_window_statuses_and_errors(
    service: Service, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    config = SimulatorConfig(
        credentials_dir=tmp_path / "credentials",
        twilio_auth_token=TOKEN,
        behaviours={"twilio": Behaviour(reports={"read": 1.0}, report_delay_ms=20)},
        twilio_whatsapp_inbound_url=f"{PUBLIC}/v1/webhooks/twilio_whatsapp/tw/inbound",
    )
    await register(client, "order", {"data": ORDER})
    await register(client, "chat", {"text": "Your order {{ data.order }} shipped."})
    wrote, never, gone = "+5511900000031", "+5511900000032", "+5511900000033"
    async with Simulator(config) as sim, serving(service, sim):
        twilio = sim.http["twilio"]
        twilio.whatsapp.user_writes(wrote, "where is my order?")
        await eventually(lambda: window_of(service, wrote), within=10)
        sim.state("twilio").script("whatsapp:" + gone, "63024")
        ids = {
            "text": await send(client, "chat", wrote),
            "template": await send(client, "order", never),
            "shut": await send(client, "chat", never),
            "gone": await send(client, "order", gone),
        }
        results: dict[str, Any] = {}
        for name, nid in ids.items():
            results[name] = await eventually(lambda n=nid: final(client, n), within=20)
        await eventually(lambda: _read(client, ids["text"]), within=10)

    assert results["text"]["status"] == "DELIVERED"
    assert results["template"]["status"] == "DELIVERED"
    shut = results["shut"]
    assert (shut["status"], shut["failureKind"]) == ("FAILED", "permanent")
    assert "24-hour customer service window" in shut["lastError"]
    assert (results["gone"]["status"], results["gone"]["failureKind"]) == ("FAILED", "permanent")
    suppressed = await client.get(f"/v1/suppressions/whatsapp/{gone}")
    assert suppressed.status_code == 200, suppressed.text
    sent = {(r.address, "ContentSid" in r.payload) for r in sim.state("twilio").received}
    assert sent == {("whatsapp:" + wrote, False), ("whatsapp:" + never, True)}
    template = next(r.payload for r in sim.state("twilio").received if "ContentSid" in r.payload)
    assert (template["ContentSid"], template["ContentVariables"]) == (CONTENT, '{"1": "42"}')
    assert template["From"] == "whatsapp:+14155238886"


async def _read(client: httpx.AsyncClient, notification_id: str) -> bool:
    return "read" in await history(client, notification_id)
