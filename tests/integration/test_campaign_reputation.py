"""The reputation guard (campaigns/reputation.py): a campaign whose recipients complain
pauses itself, its unsent deliveries held and nothing lost, until it is resumed.

The whole loop runs on the simulated Resend: it sends, draws each email's fate from its
``reports`` (complaints at a rate) and posts the complaints to tidings' webhook route, as
Resend would; the guard counts what those webhooks recorded. The store's part (hold,
event, resume) runs on both databases."""

from __future__ import annotations

import asyncio
import base64
import uuid
from collections.abc import AsyncIterator, Awaitable
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from tests.email_providers import api_on
from tests.helpers import eventually, put_type, running_dispatcher
from tests.processes import free_port
from tidings.campaigns.expander import Expander
from tidings.clock import utcnow
from tidings.providers.resend import ResendAccount, ResendProvider
from tidings.service import Service
from tidings.simulator.behaviour import Behaviour
from tidings.simulator.server import Simulator, SimulatorConfig
from tidings.states import Status
from tidings.store import campaign_pause
from tidings.store.campaign_pause import HOLD
from tidings.store.schema import delivery, topic_subscription, user_profile

KEY = "re_key_of_the_test"
SECRET = "whsec_" + base64.b64encode(b"reputation-test-secret").decode()
TOPIC = "fans"


async def add_fans(service: Service, count: int) -> None:
    now = utcnow()
    ids = [f"fan-{i:05d}" for i in range(count)]
    profiles = [
        {"id": u, "email": f"{u}@example.com", "timezone": "UTC", "created_at": now,
         "updated_at": now}
        for u in ids
    ]  # fmt: skip
    follows = [{"topic": TOPIC, "user_id": u, "created_at": now} for u in ids]
    async with service.db.engine.begin() as conn:
        await conn.execute(sa.insert(user_profile), profiles)
        await conn.execute(sa.insert(topic_subscription), follows)


async def start_campaign(client: httpx.AsyncClient) -> str:
    await put_type(client, "promo", category="marketing", channels=("email",))
    body = {"type": "promo", "audience": {"topic": TOPIC}}
    answer = await client.post(
        "/v1/campaigns", json=body, headers={"Idempotency-Key": str(uuid.uuid4())}
    )
    assert answer.status_code == 202, answer.text
    campaign_id: str = answer.json()["campaignId"]
    return campaign_id


async def shown(client: httpx.AsyncClient, campaign_id: str) -> dict[str, Any]:
    answer = await client.get(f"/v1/campaigns/{campaign_id}")
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


async def campaign_events(client: httpx.AsyncClient) -> list[dict[str, Any]]:
    types = [("types", "campaign.paused"), ("types", "campaign.resumed")]
    answer = await client.get("/v1/events", params=[*types, ("limit", "100")])
    assert answer.status_code == 200, answer.text
    found: list[dict[str, Any]] = answer.json()["events"]
    return found


async def held(service: Service, campaign_id: str) -> int:
    query = sa.select(sa.func.count()).where(
        delivery.c.campaign_id == uuid.UUID(campaign_id),
        delivery.c.status == Status.PENDING.value,
        delivery.c.next_attempt_at >= HOLD,
    )
    async with service.db.engine.connect() as conn:
        return int((await conn.execute(query)).scalar_one())


# --- The store's part, on both databases ----------------------------------------------------


async def test_a_pause_holds_the_unsent_and_a_resume_releases_them(
    service: Service, client: httpx.AsyncClient
) -> None:
    await add_fans(service, 30)
    campaign_id = await start_campaign(client)
    async with service.db.engine.begin() as conn:  # due now, expanded by hand
        await conn.execute(sa.text("UPDATE campaign SET send_at = :s"), {"s": utcnow()})
    expander = Expander(service.db, service.types, service.wakeup, service.settings.campaigns, "t")
    assert await expander.step()
    the_id = uuid.UUID(campaign_id)

    assert await campaign_pause.pause(service.db, the_id, "complaint rate too high", utcnow())
    assert not await campaign_pause.pause(service.db, the_id, "again", utcnow())  # not running
    body = await shown(client, campaign_id)
    assert (body["status"], body["pausedReason"]) == ("PAUSED", "complaint rate too high")
    assert await held(service, campaign_id) == 30
    # A retry coming back PENDING meanwhile is held by the guard's next round.
    async with service.db.engine.begin() as conn:
        one = sa.select(delivery.c.id).where(delivery.c.campaign_id == the_id).limit(1)
        await conn.execute(
            sa.update(delivery)
            .where(delivery.c.id == one.scalar_subquery())
            .values(next_attempt_at=utcnow() + timedelta(seconds=5))
        )
    assert await held(service, campaign_id) == 29
    assert await campaign_pause.hold_paused(service.db) == 1
    assert await held(service, campaign_id) == 30

    answer = await client.post(f"/v1/campaigns/{campaign_id}/resume")
    assert answer.status_code == 200, answer.text
    assert (answer.json()["status"], answer.json()["pausedReason"]) == ("SENDING", None)
    assert answer.json()["pausedAt"] is not None  # the guard counts the sends after it
    assert await held(service, campaign_id) == 0
    again = await client.post(f"/v1/campaigns/{campaign_id}/resume")
    assert again.json()["status"] == "SENDING"  # resuming twice is harmless
    # PostgreSQL shows an event once no older transaction runs (store/events.py).
    events = await eventually(lambda: _count(campaign_events(client), 2), within=30)
    assert [(e["type"], e["data"]["campaignId"]) for e in events] == [
        ("campaign.paused", campaign_id),
        ("campaign.resumed", campaign_id),
    ]
    assert events[0]["data"]["reason"] == "complaint rate too high"
    missing = await client.post(f"/v1/campaigns/{uuid.uuid4()}/resume")
    assert missing.status_code == 404


# --- The whole loop: complaints posted by the simulated Resend --------------------------------


@pytest.fixture
async def loop(
    service: Service, tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[Simulator]:
    """The simulated Resend posting its events to tidings' API, at ``complaints`` (the
    test's parameter) and 10 ms per send; the guard looking every 0.1 s."""
    port = free_port()
    behaviour = Behaviour(reports={"complaint": request.param}, report_delay_ms=20, latency_ms=10)
    config = SimulatorConfig(
        credentials_dir=tmp_path / "credentials",
        resend_api_key=KEY,
        resend_domains=["tidings.example.com"],
        resend_webhook_secret=SECRET,
        resend_webhook_url=f"http://127.0.0.1:{port}/v1/webhooks/resend/rs",
        resend_webhook_events=["email.complained", "email.bounced"],
        behaviours={"resend": behaviour},
    )
    service.settings.campaigns.reputation_interval = 0.1
    service.settings.lanes.low.concurrency = 64  # campaigns send LOW
    async with Simulator(config) as sim, api_on(service, port):
        account = ResendAccount(
            api_key=KEY, base_url=sim.url, from_email="noreply@tidings.example.com",
            webhook_secret=SECRET,
        )  # fmt: skip
        service.settings = service.settings.model_copy(update={"accounts": {"rs": account}})
        yield sim


def sent(sim: Simulator) -> int:
    return len(sim.state("resend").received)


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
@pytest.mark.parametrize("loop", [0.005], indirect=True)
async def test_a_campaign_with_05_percent_complaints_pauses_before_1500_sends(
    service: Service, client: httpx.AsyncClient, loop: Simulator
) -> None:
    await add_fans(service, 5000)
    campaign_id = await start_campaign(client)
    provider = ResendProvider("rs", service.settings.accounts["rs"])  # type: ignore[arg-type]
    async with running_dispatcher(service, provider):
        paused = await eventually(
            lambda: _status(client, campaign_id, "PAUSED", "DONE"), within=60, interval=0.1
        )
        assert paused["status"] == "PAUSED"
        # The deliveries claimed before the pause are sent; then nothing more.
        await eventually(lambda: _settled(client, campaign_id), within=30, interval=0.2)
        stopped = sent(loop)
        assert stopped < 1500, stopped
        await asyncio.sleep(1.0)  # several lane polls and guard rounds
        assert sent(loop) == stopped
        assert paused["pausedReason"].startswith("complaint rate")
        assert "campaigns.max_complaint_rate 0.10%" in paused["pausedReason"]
        assert await held(service, campaign_id) == 5000 - stopped  # nothing lost
        events = await eventually(lambda: _count(campaign_events(client), 1), within=30)
        assert [e["type"] for e in events] == ["campaign.paused"]

        answer = await client.post(f"/v1/campaigns/{campaign_id}/resume")
        assert answer.json()["status"] == "SENDING"

        async def goes_on() -> bool:
            return sent(loop) > stopped + 100

        await eventually(goes_on, within=60, interval=1)  # it goes on
        await client.post(f"/v1/campaigns/{campaign_id}/cancel")
    await provider.close()


# Two minutes on a shared machine: 5,000 marketing sends (about 40 a second here).
@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
@pytest.mark.parametrize("loop", [0.0005], indirect=True)
async def test_a_campaign_with_005_percent_complaints_completes(
    service: Service, client: httpx.AsyncClient, loop: Simulator
) -> None:
    await add_fans(service, 5000)
    campaign_id = await start_campaign(client)
    provider = ResendProvider("rs", service.settings.accounts["rs"])  # type: ignore[arg-type]
    async with running_dispatcher(service, provider):
        done = await eventually(
            lambda: _status(client, campaign_id, "PAUSED", "DONE"), within=120, interval=0.2
        )
    await provider.close()
    complaints = [o for _, o in loop.state("resend").reports if o == "complaint"]
    assert (done["status"], done["byStatus"]) == ("DONE", {"SENT": 5000}), done
    assert sent(loop) == 5000 and complaints  # it had complaints, under the limit
    assert await campaign_events(client) == []


async def _count(events: Awaitable[list[dict[str, Any]]], n: int) -> Any:
    found = await events
    return found if len(found) >= n else None


async def _status(client: httpx.AsyncClient, campaign_id: str, *statuses: str) -> Any:
    body = await shown(client, campaign_id)
    return body if body["status"] in statuses else None


async def _settled(client: httpx.AsyncClient, campaign_id: str) -> bool:
    """None of the campaign's deliveries is being sent."""
    by_status = (await shown(client, campaign_id))["byStatus"]
    return not by_status.get("SENDING") and not by_status.get("QUEUED")
