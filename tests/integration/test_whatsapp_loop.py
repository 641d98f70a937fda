"""WhatsApp's whole loop: tidings sends approved templates through the simulated Cloud API,
which posts its statuses back signed (X-Hub-Signature-256), as Meta does; deliveries move to
DELIVERED and record reads, a failed status fails its delivery, and each error class of
the send ends as its table says (free text outside the 24-hour window, a template's
parameters wrong, the number's rate)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from tests.helpers import eventually, post
from tests.integration.test_chat_loop import settled
from tests.processes import free_port
from tidings.api.app import create_app
from tidings.assembly import assemble_dispatcher
from tidings.providers.whatsapp import WhatsAppAccount
from tidings.service import Service, providers_from_settings
from tidings.settings import Settings
from tidings.simulator.behaviour import Behaviour
from tidings.simulator.server import Simulator, SimulatorConfig

PORT = free_port()
PUBLIC = f"http://127.0.0.1:{PORT}"
ORDER = {"template": "order_update", "language": "pt_BR", "1": "{{ data.order }}"}


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"public_url": PUBLIC})


@contextlib.asynccontextmanager
async def serving(service: Service, sim: Simulator) -> AsyncIterator[None]:
    """tidings' API on PORT (the simulator posts statuses to it) and a dispatcher."""
    account = WhatsAppAccount(
        phone_number_id=sim.config.whatsapp_phone_number_id,
        access_token=sim.config.whatsapp_access_token,
        app_secret=sim.config.whatsapp_app_secret,
        base_url=sim.url,
        timeout=5,
    )
    service.settings = service.settings.model_copy(
        update={"accounts": {"wa": account}, "providers": {"whatsapp": ["wa"]}}
    )
    config = uvicorn.Config(create_app(service), port=PORT, log_level="warning", lifespan="off")
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


async def register(client: httpx.AsyncClient, name: str, template: dict[str, Any]) -> None:
    kind = {"category": "transactional", "priority": "high", "channels": ["whatsapp"]}
    assert (await client.put(f"/v1/types/{name}", json=kind)).status_code in (200, 201)
    answer = await client.put(f"/v1/templates/{name}/whatsapp/en", json=template)
    assert answer.status_code in (200, 201), answer.text


async def send(client: httpx.AsyncClient, kind: str, number: str) -> str:
    body = {"type": kind, "to": {"whatsapp": number}, "data": {"order": "42"}}
    answer = await post(client, body)
    assert answer.status_code == 202, answer.text
    return str(answer.json()["id"])


async def history(client: httpx.AsyncClient, notification_id: str) -> list[str]:
    answer = await client.get(f"/v1/notifications/{notification_id}")
    [item] = answer.json()["deliveries"]
    return [entry["kind"] for entry in item["history"]]


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
async def test_whatsapp_statuses_come_back_signed_and_each_error_is_classified(
    service: Service, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    config = SimulatorConfig(
        credentials_dir=tmp_path / "credentials",
        behaviours={"whatsapp": Behaviour(reports={"read": 1.0}, report_delay_ms=20)},
        whatsapp_webhook_url=f"{PUBLIC}/v1/webhooks/whatsapp/wa",
    )
    await register(client, "order", {"data": ORDER})
    await register(client, "chat", {"text": "Your order {{ data.order }} shipped."})
    numbers = {
        "read": "+5511900000001",  # delivered, then read
        "throttled": "+5511900000002",  # the number's throughput once (130429), then sent
        "params": "+5511900000003",  # 132000: the template's parameters do not match
        "window": "+5511900000004",  # free text outside the 24-hour window: 131047
        "failed": "+5511900000005",  # accepted, then a failed status (131026)
    }
    async with Simulator(config) as sim, serving(service, sim):
        whatsapp = sim.state("whatsapp")
        whatsapp.script(numbers["throttled"][1:], "130429")
        whatsapp.script(numbers["params"][1:], "132000")
        read = await send(client, "order", numbers["read"])
        await send(client, "order", numbers["throttled"])
        await send(client, "order", numbers["params"])
        await send(client, "chat", numbers["window"])
        expected = {
            numbers["read"]: ("DELIVERED", None),
            numbers["throttled"]: ("DELIVERED", None),
            numbers["params"]: ("FAILED", "poison"),
            numbers["window"]: ("FAILED", "permanent"),
        }
        await eventually(lambda: settled(service, expected), within=20)
        await eventually(lambda: _has_read(client, read), within=10)
        whatsapp.behaviour = whatsapp.behaviour.model_copy(
            update={"reports": {"failed:131026": 1.0}}
        )
        await send(client, "order", numbers["failed"])
        expected[numbers["failed"]] = ("FAILED", "permanent")
        await eventually(lambda: settled(service, expected), within=20)
        assert whatsapp.counts["reports_failed"] == 0

    sent = {r.address: r.payload for r in whatsapp.received}
    assert set(sent) == {"5511900000001", "5511900000002", "5511900000005"}
    template = sent["5511900000001"]["template"]
    assert template == {
        "name": "order_update",
        "language": {"code": "pt_BR"},
        "components": [{"type": "body", "parameters": [{"type": "text", "text": "42"}]}],
    }
    assert whatsapp.summary()["duplicates"] == 0


async def _has_read(client: httpx.AsyncClient, notification_id: str) -> bool:
    return "read" in await history(client, notification_id)
