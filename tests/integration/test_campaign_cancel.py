"""Cancel in the middle of a draining campaign, against the provider simulator's SendGrid
over loopback HTTP: after the cancel answers, the simulator receives nothing more from the
campaign, and sent + cancelled + skipped + failed equals the campaign's deliveries."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from pydantic import SecretStr

from tests.helpers import eventually, put_type, running_dispatcher
from tests.integration.test_campaigns import EMAIL_ONLY, add_users, campaign_status, post_campaign
from tidings.providers.sendgrid import SendGridAccount, SendGridProvider
from tidings.service import Service
from tidings.simulator.server import Simulator, SimulatorConfig

KEY = "SG.test-key"


@pytest.fixture
async def sim(tmp_path: Path) -> AsyncIterator[Simulator]:
    async with Simulator(SimulatorConfig(credentials_dir=tmp_path, sendgrid_api_key=KEY)) as s:
        yield s


async def test_nothing_is_sent_after_cancel_answers(
    client: httpx.AsyncClient, service: Service, sim: Simulator
) -> None:
    await put_type(client, "presale", **EMAIL_ONLY)
    await add_users(client, 300, topic="artist:77")
    suppressed = await client.put("/v1/suppressions/email/user-00007@example.com", json={})
    assert suppressed.status_code == 200
    body = {"type": "presale", "audience": {"topic": "artist:77"}, "spreadOver": "20s"}
    campaign_id = (await post_campaign(client, body)).json()["campaignId"]
    account = SendGridAccount(
        api_key=SecretStr(KEY), base_url=sim.url, from_email="noreply@example.com", timeout=5
    )
    provider = SendGridProvider("sendgrid-main", account)
    received = sim.state("sendgrid").received
    try:
        async with running_dispatcher(service, provider):
            await eventually(lambda: len(received) >= 40, within=30, interval=0.05)
            answer = await client.post(f"/v1/campaigns/{campaign_id}/cancel")
            at_answer = len(received)
            await asyncio.sleep(2.5)  # longer than any dispatcher's staleness
            assert len(received) == at_answer, "the simulator received more after cancel"
    finally:
        await provider.close()
    assert answer.status_code == 200, answer.text
    counts = answer.json()
    assert counts["status"] == "CANCELLED" and counts["inProgress"] == 0
    assert 40 <= counts["sent"] < 299 and counts["cancelled"] > 0
    assert counts["sent"] == at_answer  # every message the simulator got is counted as sent
    assert counts["skipped"] == 1 and counts["failed"] == 0
    shown = await campaign_status(client, campaign_id)
    total = counts["sent"] + counts["cancelled"] + counts["skipped"] + counts["failed"]
    assert total == shown["deliveries"] == 300
    assert shown["status"] == "CANCELLED"
    again = await client.post(f"/v1/campaigns/{campaign_id}/cancel")
    assert again.json() == counts
    # The event feed says the same: each cancelled delivery once, the campaign's end once.
    events = await eventually(lambda: _cancel_events(client, counts["cancelled"]), within=10)
    assert events.count("campaign.cancelled") == 1
    assert events.count("delivery.cancelled") == counts["cancelled"]
    assert events.count("delivery.sent") == counts["sent"]


async def _cancel_events(client: httpx.AsyncClient, cancelled: int) -> list[str] | None:
    """The types of every event in the feed, once the cancelled deliveries are all there
    (PostgreSQL shows an event once older transactions have ended)."""
    found: list[str] = []
    after = None
    while True:
        page = (await client.get("/v1/events", params={"after": after} if after else {})).json()
        if not page["events"] and not page["more"]:
            break
        found += [event["type"] for event in page["events"]]
        after = page["next"]
    return found if found.count("delivery.cancelled") >= cancelled else None


async def test_cancel_before_expansion_leaves_nothing_to_send(
    client: httpx.AsyncClient, service: Service
) -> None:
    await put_type(client, "presale", **EMAIL_ONLY)
    await add_users(client, 3, topic="artist:77")
    body = {"type": "presale", "audience": {"topic": "artist:77"}, "sendAt": "2099-01-01T00:00Z"}
    answer = await post_campaign(client, body)
    assert answer.status_code == 422  # more than a year ahead
    body["sendAt"] = "2027-06-01T10:00:00+00:00"
    campaign_id = (await post_campaign(client, body)).json()["campaignId"]
    cancelled = await client.post(f"/v1/campaigns/{campaign_id}/cancel")
    assert cancelled.status_code == 200
    assert cancelled.json()["status"] == "CANCELLED" and cancelled.json()["cancelled"] == 0
    shown = await campaign_status(client, campaign_id)
    assert shown["status"] == "CANCELLED" and shown["deliveries"] == 0
