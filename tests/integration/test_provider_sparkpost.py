"""SparkPost: no idempotency key (an answer lost and retried is a second email; an
at-most-once account fails it instead), its suppression list, and the webhook batches
posted by the simulator end to end, with Basic credentials or a token. The adapter's error
table: tests/integration/contract."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.email_providers import api_on, delivery, kinds, send_one_by_one, status_is, suppression
from tests.helpers import email_to, eventually, post, put_type, running_dispatcher
from tests.messages import message
from tests.processes import free_port
from tidings.assembly import assemble_dispatcher
from tidings.dispatch.pipeline.retry import RetrySettings
from tidings.priorities import Channel
from tidings.providers.base import Content, PermanentError
from tidings.providers.chains import ProviderSet
from tidings.providers.sparkpost import SparkPostAccount, SparkPostProvider
from tidings.service import Service
from tidings.simulator.behaviour import Behaviour
from tidings.simulator.server import Simulator, SimulatorConfig
from tidings.states import Effect

KEY = "sparkpost-key-of-the-test"
USER, PASSWORD = "sparkpost-hooks", "hook-password-of-the-test"


def sim_config(tmp_path: Path, **changes: Any) -> SimulatorConfig:
    fields: dict[str, Any] = {
        "credentials_dir": tmp_path / "credentials",
        "sparkpost_api_key": KEY,
        "sparkpost_domains": ["tidings.example.com"],
        "sparkpost_webhook_username": USER,
        "sparkpost_webhook_password": PASSWORD,
    }
    return SimulatorConfig(**(fields | changes))


@pytest.fixture
async def sim(tmp_path: Path) -> AsyncIterator[Simulator]:
    async with Simulator(sim_config(tmp_path)) as simulator:
        yield simulator


def account(sim: Simulator, **changes: Any) -> SparkPostAccount:
    fields: dict[str, Any] = {
        "api_key": KEY,
        "base_url": sim.url,
        "from_email": "noreply@tidings.example.com",
        "webhook_username": USER,
        "webhook_password": PASSWORD,
        "timeout": 5,
    }
    return SparkPostAccount.model_validate(fields | changes)


@pytest.fixture
def fast_retries(service: Service) -> None:
    retry = RetrySettings(base_delay=0.05, max_delay=0.1, max_attempts=4)
    service.settings = service.settings.model_copy(update={"retry": retry})


async def lose_the_first_answer(
    service: Service, client: httpx.AsyncClient, sim: Simulator, provider: SparkPostProvider
) -> dict[str, Any]:
    """Send one email whose first answer is lost; the delivery once it ended."""
    name = provider.name
    providers = ProviderSet({name: provider}, {"email": [name]}, {name: provider.account})
    sim.state("sparkpost").script("ana@example.com", "answer_lost")
    await put_type(client, channels=("email",))
    notification_id = (await post(client, email_to("ana@example.com"))).json()["id"]

    async def ended() -> bool:
        found = await delivery(client, {"notification_id": notification_id})
        return found["status"] in ("SENT", "FAILED")

    stop = asyncio.Event()
    task = asyncio.create_task(assemble_dispatcher(service, providers).run(stop))
    try:
        await eventually(ended)
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=30)
    await provider.close()
    return await delivery(client, {"notification_id": notification_id})


@pytest.mark.usefixtures("fast_retries")
async def test_an_answer_lost_and_retried_is_a_second_email(
    service: Service, client: httpx.AsyncClient, sim: Simulator
) -> None:
    """What Resend's key prevents: SparkPost has none, so the retry of a send whose answer
    was lost (on_ambiguous = retry) reaches the user twice."""
    item = await lose_the_first_answer(service, client, sim, SparkPostProvider("sp", account(sim)))
    assert (item["status"], item["attempts"]) == ("SENT", 2)
    summary = sim.state("sparkpost").summary()
    assert (summary["received"], summary["distinct"], summary["duplicates"]) == (2, 1, 1)


async def test_an_at_most_once_account_fails_it_instead(
    service: Service, client: httpx.AsyncClient, sim: Simulator
) -> None:
    item = await lose_the_first_answer(
        service, client, sim, SparkPostProvider("sp", account(sim, on_ambiguous="fail"))
    )
    assert (item["status"], item["failureKind"]) == ("FAILED", "ambiguous")
    assert sim.state("sparkpost").summary()["received"] == 1


async def test_a_suppressed_recipient_is_permanent_and_suppressed(sim: Simulator) -> None:
    """1902: SparkPost will not mail an address that hard-bounced there."""
    state = sim.state("sparkpost")
    state.behaviour = state.behaviour.model_copy(update={"reports": {"bounce": 1.0}})
    provider = SparkPostProvider("sp", account(sim))
    email = Content(subject="Hi", text="t")
    try:
        await provider.send(message(Channel.EMAIL, "gone@example.com", email))
        with pytest.raises(PermanentError) as raised:
            await provider.send(message(Channel.EMAIL, "gone@example.com", email))
    finally:
        await provider.close()
    assert (raised.value.reason, raised.value.effect) == (
        "suppressed_recipient",
        Effect.SUPPRESS_ADDRESS,
    )
    assert "suppressed due to customer policy" in str(raised.value)


def basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


async def test_webhooks_need_the_accounts_credentials(
    service: Service, client: httpx.AsyncClient, sim: Simulator
) -> None:
    accounts = {
        "sp": account(sim),
        "sp-token": account(
            sim, webhook_username=None, webhook_password=None, webhook_token="t0ken"
        ),
    }
    service.settings = service.settings.model_copy(update={"accounts": accounts})
    batch = b'[{"msys": {"message_event": {"type": "delivery", "event_id": "1"}}}]'
    for path, headers, expected in (
        ("sp", {}, 401),
        ("sp", basic(USER, "wrong"), 401),
        ("sp", basic(USER, PASSWORD), 200),
        ("sp", {"X-MessageSystems-Webhook-Token": "t0ken"}, 401),
        ("sp-token", {"X-MessageSystems-Webhook-Token": "t0ken"}, 200),
        ("sp-token", basic(USER, PASSWORD), 401),
    ):
        response = await client.post(
            f"/v1/webhooks/sparkpost/{path}", content=batch, headers=headers
        )
        assert response.status_code == expected, (path, headers, response.text)
    response = await client.post(
        "/v1/webhooks/sparkpost/sp", content=b"{}", headers=basic(USER, PASSWORD)
    )
    assert response.status_code == 400


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
async def test_the_simulators_events_end_as_sparkpost_said(
    service: Service, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    port = free_port()
    config = sim_config(
        tmp_path,
        sparkpost_webhook_url=f"http://127.0.0.1:{port}/v1/webhooks/sparkpost/sp",
        behaviours={"sparkpost": Behaviour(report_delay_ms=1000)},
    )
    outcomes = {"ana@example.com": "delivered", "bob@example.com": "bounce"}
    outcomes |= {"cy@example.com": "soft_bounce", "dee@example.com": "complaint"}
    await put_type(client, channels=("email",))
    async with Simulator(config) as sim, api_on(service, port):
        service.settings = service.settings.model_copy(update={"accounts": {"sp": account(sim)}})
        state = sim.state("sparkpost")
        provider = SparkPostProvider("sp", account(sim))
        async with running_dispatcher(service, provider):
            sent = await send_one_by_one(client, state, outcomes)
            again = await post(client, email_to("bob@example.com"))
            await eventually(lambda: status_is(client, again.json()["id"], "SKIPPED"))
        await provider.close()
        assert state.counts["reports_failed"] == 0

    statuses = [(await delivery(client, s))["status"] for s in sent]
    assert statuses == ["DELIVERED", "BOUNCED", "SENT", "DELIVERED"]
    assert "soft_bounced" in kinds(await delivery(client, sent[2]))
    assert "complained" in kinds(await delivery(client, sent[3]))
    reasons = {address: await suppression(client, address) for address in outcomes}
    assert reasons == {
        "ana@example.com": None,
        "bob@example.com": "hard_bounce",
        "cy@example.com": None,
        "dee@example.com": "complaint",
    }
