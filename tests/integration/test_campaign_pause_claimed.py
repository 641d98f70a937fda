"""A pause holds what was already claimed: against the simulated SendGrid, slow and with two
requests at a time, a lane holds more claimed deliveries than are being sent. Once the
dispatcher knows of the pause (its next refresh of the stopped campaigns), only the requests
already made reach the provider; the claimed ones are given back, and a resume sends every
one of them, once."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
from pydantic import SecretStr

from tests.helpers import eventually, put_type
from tests.integration.test_campaigns import EMAIL_ONLY, add_users, campaign_status, post_campaign
from tidings.assembly import assemble_dispatcher
from tidings.clock import utcnow
from tidings.dispatch.dispatcher import Dispatcher
from tidings.providers.sendgrid import SendGridAccount
from tidings.service import Service, providers_from_settings
from tidings.simulator.behaviour import Behaviour
from tidings.simulator.server import Simulator, SimulatorConfig
from tidings.store import campaign_pause

KEY = "SG.test-key"
USERS = 60
IN_FLIGHT = 2  # the account's requests at once: fewer than the LOW lane claims (8)


async def test_a_pause_gives_back_what_was_claimed(
    client: httpx.AsyncClient, service: Service, tmp_path: Path
) -> None:
    await put_type(client, "presale", **EMAIL_ONLY)
    await add_users(client, USERS, topic="artist:77")
    body = {"type": "presale", "audience": {"topic": "artist:77"}, "spreadOver": "2s"}
    campaign_id = (await post_campaign(client, body)).json()["campaignId"]
    config = SimulatorConfig(
        credentials_dir=tmp_path,
        sendgrid_api_key=KEY,
        behaviours={"sendgrid": Behaviour(latency_ms=300)},
    )
    async with Simulator(config) as sim, dispatching(service, sim) as dispatcher:
        received = sim.state("sendgrid").received
        await eventually(lambda: len(received) >= 10, within=30, interval=0.05)
        the_id = uuid.UUID(campaign_id)
        assert await campaign_pause.pause(service.db, the_id, "by the test", utcnow())
        paused_at = time.monotonic()
        known = dispatcher.cancelled
        # The next refresh to start after the pause committed (one may be under way).
        await eventually(lambda: known.refreshed_at > paused_at + known.interval, within=10)
        at_refresh = len(received)
        await asyncio.sleep(2.0)  # long enough for the claimed ones to be sent
        after_pause = len(received) - at_refresh
        assert after_pause <= IN_FLIGHT, (after_pause, at_refresh)
        assert at_refresh < USERS
        resumed = await client.post(f"/v1/campaigns/{campaign_id}/resume")
        assert resumed.status_code == 200, resumed.text
        await eventually(lambda: len(received) >= USERS, within=60, interval=0.1)
        await asyncio.sleep(0.5)
    assert len(received) == USERS
    assert sim.state("sendgrid").summary()["duplicates"] == 0
    shown = await eventually(lambda: _done(client, campaign_id), within=30)
    assert shown["byStatus"].get("SENT") == USERS


async def _done(client: httpx.AsyncClient, campaign_id: str) -> dict[str, object] | None:
    shown = await campaign_status(client, campaign_id)
    return shown if shown["byStatus"].get("SENT") == USERS else None


@contextlib.asynccontextmanager
async def dispatching(service: Service, sim: Simulator) -> AsyncIterator[Dispatcher]:
    """A dispatcher sending email through a SendGrid account of the settings, whose
    bulkhead lets IN_FLIGHT requests go at once (the others wait, claimed)."""
    account = SendGridAccount(
        api_key=SecretStr(KEY),
        base_url=sim.url,
        from_email="noreply@example.com",
        timeout=5,
        max_in_flight=IN_FLIGHT,
    )
    service.settings = service.settings.model_copy(
        update={"accounts": {"sg": account}, "providers": {"email": ["sg"]}}
    )
    providers = providers_from_settings(service.settings)
    dispatcher = assemble_dispatcher(service, providers)
    stop = asyncio.Event()
    task = asyncio.create_task(dispatcher.run(stop))
    try:
        yield dispatcher
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=30)
        await providers.close()
