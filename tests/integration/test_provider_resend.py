"""Resend: the delivery id as its Idempotency-Key (an answer lost and retried reaches the
user once), the simulator's keys as Resend documents them, and the Svix-signed webhooks
posted by the simulator end to end. The adapter's error table: tests/integration/contract."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr, ValidationError

from tests.email_providers import (
    api_on,
    delivery,
    kinds,
    send_one_by_one,
    status_is,
    suppression,
)
from tests.helpers import email_to, eventually, post, put_type, running_dispatcher
from tests.processes import free_port
from tidings.dispatch.pipeline.retry import RetrySettings
from tidings.providers.resend import ResendAccount, ResendProvider
from tidings.service import Service
from tidings.simulator.behaviour import Behaviour
from tidings.simulator.server import Simulator, SimulatorConfig

KEY = "re_key_of_the_test"
SECRET = "whsec_" + base64.b64encode(b"resend-webhook-secret-of-the-test").decode()


def sim_config(tmp_path: Path, **changes: Any) -> SimulatorConfig:
    fields: dict[str, Any] = {
        "credentials_dir": tmp_path / "credentials",
        "resend_api_key": KEY,
        "resend_domains": ["tidings.example.com"],
        "resend_webhook_secret": SECRET,
    }
    return SimulatorConfig(**(fields | changes))


@pytest.fixture
async def sim(tmp_path: Path) -> AsyncIterator[Simulator]:
    async with Simulator(sim_config(tmp_path)) as simulator:
        yield simulator


def account(sim: Simulator, **changes: Any) -> ResendAccount:
    fields: dict[str, Any] = {
        "api_key": KEY,
        "base_url": sim.url,
        "from_email": "noreply@tidings.example.com",
        "webhook_secret": SECRET,
        "timeout": 5,
    }
    return ResendAccount.model_validate(fields | changes)


def request(key: str | None, **body: Any) -> dict[str, Any]:
    email = {"from": "a@tidings.example.com", "to": "b@example.com", "subject": "s", "text": "t"}
    headers = {"Authorization": f"Bearer {KEY}"} | ({"Idempotency-Key": key} if key else {})
    return {"json": email | body, "headers": headers}


@pytest.fixture
def fast_retries(service: Service) -> None:
    retry = RetrySettings(base_delay=0.05, max_delay=0.1, max_attempts=4)
    service.settings = service.settings.model_copy(update={"retry": retry})


# --- The idempotency key, end to end ------------------------------------------------------


@pytest.mark.usefixtures("fast_retries")
async def test_an_answer_lost_and_retried_reaches_the_user_once(
    service: Service, client: httpx.AsyncClient, sim: Simulator
) -> None:
    """Resend accepts the email and the connection drops before its answer: the send is
    ambiguous, the account retries it (on_ambiguous = retry) with the same key, and Resend
    answers as the first time. One email; the delivery SENT with the first email's id."""
    state = sim.state("resend")
    state.script("ana@example.com", "answer_lost")
    await put_type(client, channels=("email",))
    response = await post(client, email_to("ana@example.com"))
    notification_id = response.json()["id"]
    provider = ResendProvider("resend-main", account(sim))
    async with running_dispatcher(service, provider):
        await eventually(lambda: status_is(client, notification_id, "SENT"))
    await provider.close()

    [email] = state.received  # the user's mailbox: one email
    # Sent once; the retry was answered from the key, without a second email.
    assert (state.counts["requests"], state.counts["replayed"]) == (1, 1)
    item = await delivery(client, {"notification_id": notification_id})
    assert item["attempts"] == 2
    assert item["providerMessageId"] == state.answers[email.idempotency_key]["id"]


async def test_the_key_is_honoured_as_resend_documents_it(sim: Simulator) -> None:
    async with httpx.AsyncClient(base_url=sim.url) as http:
        first = await http.post("/emails", **request("k-1"))
        again = await http.post("/emails", **request("k-1"))
        changed = await http.post("/emails", **request("k-1", subject="other"))
        unkeyed = [await http.post("/emails", **request(None)) for _ in range(2)]
        too_long = await http.post("/emails", **request("k" * 257))
    assert first.status_code == again.status_code == 200
    assert first.json() == again.json()  # the same email id: nothing sent again
    assert changed.status_code == 409
    assert changed.json()["name"] == "invalid_idempotent_request"
    assert unkeyed[0].json() != unkeyed[1].json()  # without a key, each request sends
    assert (too_long.status_code, too_long.json()["name"]) == (400, "invalid_idempotency_key")
    assert len(sim.state("resend").received) == 3


async def test_a_key_in_progress_is_409_and_a_refused_one_is_free(sim: Simulator) -> None:
    resend = sim.http["resend"]
    assert resend.keys.begin("k-2", {"a": 1}) == ("new", None)
    async with httpx.AsyncClient(base_url=sim.url) as http:
        busy = await http.post("/emails", **request("k-2"))
        sim.state("resend").script("b@example.com", "validation_error")
        refused = await http.post("/emails", **request("k-3"))
        retried = await http.post("/emails", **request("k-3"))
    assert (busy.status_code, busy.json()["name"]) == (409, "concurrent_idempotent_requests")
    assert refused.status_code == 400 and retried.status_code == 200


async def test_a_key_is_forgotten_after_24_hours(sim: Simulator) -> None:
    resend = sim.http["resend"]
    now = [1000.0]
    resend.keys.clock = lambda: now[0]
    async with httpx.AsyncClient(base_url=sim.url) as http:
        first = await http.post("/emails", **request("k-4"))
        now[0] += 24 * 3600 - 1
        within = await http.post("/emails", **request("k-4"))
        now[0] += 2
        after = await http.post("/emails", **request("k-4"))
    assert first.json() == within.json() != after.json()
    assert len(sim.state("resend").received) == 2


def test_the_webhook_secret_must_be_whsec_base64() -> None:
    fields = {"api_key": "k", "from_email": "a@example.com"}
    with pytest.raises(ValidationError, match="whsec_"):
        ResendAccount.model_validate(fields | {"webhook_secret": "whsec_!!!"})
    assert ResendAccount.model_validate(fields).webhook_secret is None
    assert isinstance(ResendAccount.model_validate(fields | {"webhook_secret": SECRET})
                      .webhook_secret, SecretStr)  # fmt: skip


# --- The whole loop: the simulator posts its own events to tidings --------------------------


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
async def test_the_simulators_events_end_as_resend_said(
    service: Service, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    """A delivery, a hard bounce, a soft bounce and a complaint, posted by the simulator
    with Svix signatures; then a send to the bounced address, which tidings no longer makes
    (suppressed)."""
    port = free_port()
    config = sim_config(
        tmp_path,
        resend_webhook_url=f"http://127.0.0.1:{port}/v1/webhooks/resend/rs",
        behaviours={"resend": Behaviour(report_delay_ms=1000)},
    )
    outcomes = {"ana@example.com": "delivered", "bob@example.com": "bounce"}
    outcomes |= {"cy@example.com": "soft_bounce", "dee@example.com": "complaint"}
    await put_type(client, channels=("email",))
    async with Simulator(config) as sim, api_on(service, port):
        service.settings = service.settings.model_copy(update={"accounts": {"rs": account(sim)}})
        state = sim.state("resend")
        provider = ResendProvider("rs", account(sim))
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
    assert len(sim.state("resend").received) == 4  # the fifth was never sent
