"""The whole loop on one machine: tidings sends through the simulated SendGrid and Twilio, and
they answer as the real ones do, later and signed: SendGrid's Event Webhook (delivered,
bounce, spam report; a later send to a bounced address is dropped), Twilio's status
callbacks (delivered, undelivered with an error code) and STOP replies to the number.

tidings' API is served on a real port (the providers post to it), its public URL is that
address (Twilio's signature covers the URL), and the simulator keeps what it decided, so
that the test can compare tidings' end state with it, address by address.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
import uvicorn
from pydantic import SecretStr

from tests.helpers import eventually, put_type
from tests.processes import free_port
from tidings.api.app import create_app
from tidings.assembly import assemble_dispatcher
from tidings.providers.sendgrid import SendGridAccount
from tidings.providers.twilio import TwilioAccount
from tidings.service import Service, providers_from_settings
from tidings.settings import Settings
from tidings.simulator.behaviour import Behaviour
from tidings.simulator.sendgrid import SendGridSimulator
from tidings.simulator.server import Simulator, SimulatorConfig
from tidings.store.schema import delivery, suppression

PORT = free_port()
PUBLIC = f"http://127.0.0.1:{PORT}"
FROM_NUMBER = "+15005550006"


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"public_url": PUBLIC})


@contextlib.asynccontextmanager
async def simulator(tmp_path: Path, behaviours: dict[str, Behaviour]) -> AsyncIterator[Simulator]:
    config = SimulatorConfig(
        credentials_dir=tmp_path / "credentials",
        behaviours=behaviours,
        sendgrid_event_webhook_url=f"{PUBLIC}/v1/webhooks/sendgrid/sendgrid-sim",
        twilio_inbound_url=f"{PUBLIC}/v1/webhooks/twilio/twilio-sim/inbound",
    )
    async with Simulator(config) as sim:
        yield sim


def accounts(sim: Simulator, **twilio: Any) -> dict[str, Any]:
    sendgrid = sim.http["sendgrid"]
    assert isinstance(sendgrid, SendGridSimulator)
    return {
        "sendgrid-sim": SendGridAccount(
            api_key=SecretStr(sim.config.sendgrid_api_key),
            base_url=sim.url,
            from_email="noreply@tidings.example.com",
            event_webhook_public_key=sendgrid.events.public_key,
            timeout=5,
        ),
        "twilio-sim": TwilioAccount.model_validate(
            {
                "account_sid": sim.config.twilio_account_sid,
                "auth_token": sim.config.twilio_auth_token,
                "from_number": FROM_NUMBER,
                "base_url": sim.url,
                "timeout": 5,
            }
            | twilio
        ),
    }


@contextlib.asynccontextmanager
async def serving(service: Service, sim: Simulator, **twilio: Any) -> AsyncIterator[None]:
    """tidings' API on PORT and a dispatcher sending through the simulator."""
    chains = {"email": ["sendgrid-sim"], "sms": ["twilio-sim"]}
    service.settings = service.settings.model_copy(
        update={"accounts": accounts(sim, **twilio), "providers": chains}
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


async def accept(client: httpx.AsyncClient, items: list[dict[str, Any]]) -> None:
    for start in range(0, len(items), 500):
        batch = [
            {"idempotencyKey": str(uuid.uuid4()), **item} for item in items[start : start + 500]
        ]
        answer = await client.post("/v1/notifications/batch", json={"notifications": batch})
        assert answer.status_code == 200, answer.text


async def rows(service: Service) -> dict[str, tuple[str, str | None]]:
    """Address -> (status, failure kind) of every delivery."""
    query = sa.select(delivery.c.address, delivery.c.status, delivery.c.failure_kind)
    async with service.db.engine.connect() as conn:
        return {r.address: (r.status, r.failure_kind) for r in await conn.execute(query)}


async def suppressed(service: Service) -> dict[str, str]:
    query = sa.select(suppression.c.address, suppression.c.reason)
    async with service.db.engine.connect() as conn:
        return {r.address: r.reason for r in await conn.execute(query)}


async def settled(service: Service, sim: Simulator, total: int) -> dict[str, Any] | None:
    """The delivery rows once every one is past SENDING and every report was posted."""
    found = await rows(service)
    if len(found) < total or any(s in ("PENDING", "QUEUED", "SENDING") for s, _ in found.values()):
        return None
    for name in ("sendgrid", "twilio"):
        counts = sim.state(name).counts
        if counts["reports_posted"] + counts["reports_failed"] < counts["reports_scheduled"]:
            return None
    return found


def decided(sim: Simulator, name: str) -> dict[str, str]:
    return dict(sim.state(name).reports)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
async def test_bounces_and_stop_replies_come_back_signed_and_end_as_the_providers_said(
    service: Service, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    """2,000 emails with 5% hard bounces and 1,000 SMS with 2% STOP replies (and some spam
    reports and undelivered SMS): at the end exactly the bounced, complaining and stopping
    addresses are suppressed, and every delivery's status is what the simulator decided."""
    behaviours = {
        "sendgrid": Behaviour(reports={"bounce": 0.05, "spamreport": 0.01}, report_delay_ms=30),
        "twilio": Behaviour(
            reports={"stop": 0.02, "undelivered:30003": 0.01, "failed:30005": 0.01},
            report_delay_ms=30,
        ),
    }
    await put_type(client, "news", category="marketing", channels=("email",))
    await put_type(client, "code", priority="high", channels=("sms",))
    emails = [{"type": "news", "to": {"email": f"u{i}@example.com"}} for i in range(2000)]
    phones = [{"type": "code", "to": {"phone": f"+1555{i:07d}"}} for i in range(1000)]
    async with simulator(tmp_path, behaviours) as sim, serving(service, sim):
        await accept(client, emails + phones)
        found = await eventually(lambda: settled(service, sim, 3000), within=300, interval=0.5)
        mail, sms = decided(sim, "sendgrid"), decided(sim, "twilio")
        assert sim.state("sendgrid").counts["reports_failed"] == 0
        assert sim.state("twilio").counts["reports_failed"] == 0

    assert len(mail) == 2000 and len(sms) == 1000  # each sent exactly once
    expected_status = {
        "delivered": ("DELIVERED", None),
        "spamreport": ("DELIVERED", None),
        "bounce": ("BOUNCED", None),
        "stop": ("DELIVERED", None),
        "undelivered:30003": ("FAILED", "exhausted"),
        "failed:30005": ("FAILED", "permanent"),
    }
    wrong = {
        address: (found[address], outcome)
        for address, outcome in (mail | sms).items()
        if found[address] != expected_status[outcome]
    }
    assert not wrong, f"{len(wrong)} deliveries differ from the provider: {list(wrong.items())[:5]}"
    expected_reasons = {
        "bounce": "hard_bounce",
        "spamreport": "complaint",
        "stop": "stop_reply",
        "failed:30005": "unknown_number",
    }
    expected = {
        address: expected_reasons[outcome]
        for address, outcome in (mail | sms).items()
        if outcome in expected_reasons
    }
    assert await suppressed(service) == expected
    assert sum(o == "bounce" for o in mail.values()) > 50  # the mix did happen
    assert sum(o == "stop" for o in sms.values()) > 5


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
async def test_an_email_to_an_address_sendgrid_dropped_fails_and_suppresses_it(
    service: Service, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    """SendGrid accepts a send to an address on its own suppression list (202), then reports
    it ``dropped``: the delivery fails (it is going nowhere) and tidings suppresses the
    address too."""
    behaviours = {"sendgrid": Behaviour(report_delay_ms=200)}
    await put_type(client, "receipt", channels=("email",))
    async with simulator(tmp_path, behaviours) as sim, serving(service, sim):
        sendgrid = sim.http["sendgrid"]
        assert isinstance(sendgrid, SendGridSimulator)
        sendgrid.events.suppressed["gone@example.com"] = "Bounced Address"
        await accept(client, [{"type": "receipt", "to": {"email": "gone@example.com"}}])
        found = await eventually(lambda: settled(service, sim, 1), within=30, interval=0.1)
    assert found["gone@example.com"] == ("FAILED", "permanent")
    assert await suppressed(service) == {"gone@example.com": "dropped"}


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
async def test_start_lifts_a_stop_and_help_changes_nothing(
    service: Service, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    number = "+15550001111"
    async with simulator(tmp_path, {}) as sim, serving(service, sim):
        twilio = sim.http["twilio"]
        replies = twilio.reports  # type: ignore[attr-defined]
        for body, expected in [
            ("stop", {number: "stop_reply"}),
            ("HELP", {number: "stop_reply"}),
            (" Start ", {}),
            ("QUIT", {number: "stop_reply"}),
        ]:
            before = sim.state("twilio").counts["reports_posted"]
            replies.reply(number, FROM_NUMBER, body)
            await eventually(
                lambda b=before: sim.state("twilio").counts["reports_posted"] > b, within=10
            )
            assert await suppressed(service) == expected, body


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
async def test_an_unsigned_or_forged_reply_is_refused(
    service: Service, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    async with simulator(tmp_path, {}) as sim, serving(service, sim):
        form = {"From": "+15550001111", "To": FROM_NUMBER, "Body": "STOP"}
        url = f"{PUBLIC}/v1/webhooks/twilio/twilio-sim/inbound"
        async with httpx.AsyncClient() as outside:
            unsigned = await outside.post(url, data=form)
            forged = await outside.post(url, data=form, headers={"X-Twilio-Signature": "AAAA"})
    assert unsigned.status_code == forged.status_code == 401
    assert await suppressed(service) == {}


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
@pytest.mark.parametrize(("on_ambiguous", "expected"), [("fail", 1), ("retry", 2)])
async def test_an_sms_without_an_answer_is_sent_at_most_once_unless_told_to_retry(
    service: Service,
    client: httpx.AsyncClient,
    tmp_path: Path,
    on_ambiguous: str,
    expected: int,
) -> None:
    """Twilio has no idempotency key: a send that timed out may have gone out. With
    ``on_ambiguous = "fail"`` (the SMS default) it ends FAILED, kind ``ambiguous``, in the
    dead-letter queue, and is not sent again; with ``retry`` it is, and the phone gets two."""
    behaviours = {"twilio": Behaviour(latency_ms=1500)}
    await put_type(client, "code", priority="high", channels=("sms",), retry={"baseDelay": 0.1})
    number = "+15550002222"
    async with (
        simulator(tmp_path, behaviours) as sim,
        serving(service, sim, timeout=0.5, on_ambiguous=on_ambiguous),
    ):
        await accept(client, [{"type": "code", "to": {"phone": number}}])
        if on_ambiguous == "retry":
            await eventually(lambda: sim.state("twilio").counts["requests"] >= 1, within=10)
            sim.state("twilio").behaviour = Behaviour()  # answers in time from now on

            async def sent() -> bool:
                return (await rows(service))[number][0] in ("SENT", "DELIVERED")

            await eventually(sent, within=30, interval=0.1)
        else:
            await eventually(lambda: settled(service, sim, 1), within=30, interval=0.1)
        await asyncio.sleep(2.0)  # a late answer would land by now
        received = [r for r in sim.state("twilio").received if r.address == number]
        dead = (await client.get("/v1/dead-letters")).json()
    assert len(received) == expected
    if on_ambiguous == "fail":
        assert (await rows(service))[number] == ("FAILED", "ambiguous")
        assert [d["failureKind"] for d in dead] == ["ambiguous"]
    else:
        assert dead == []
