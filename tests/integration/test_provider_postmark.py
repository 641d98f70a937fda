"""Postmark: the adapter against the simulated Email API over loopback HTTP, and the
Basic-authenticated webhook end to end (through the API, and posted by the simulator)."""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from tests.email_providers import (
    api_on,
    delivery,
    kinds,
    provider_imports,
    send_emails,
    send_one_by_one,
    status_is,
    suppression,
)
from tests.helpers import email_to, eventually, post, put_type, running_dispatcher
from tests.messages import message
from tests.processes import free_port
from tidings.priorities import Channel
from tidings.providers.base import (
    Content,
    EmailSender,
    Message,
    PermanentError,
    PoisonError,
)
from tidings.providers.postmark import PostmarkAccount, PostmarkProvider
from tidings.providers.postmark.errors import classify
from tidings.service import Service
from tidings.simulator.behaviour import Behaviour
from tidings.simulator.server import Simulator, SimulatorConfig
from tidings.states import Effect

TOKEN = "server-token-of-the-test"
HOOK_USER, HOOK_PASSWORD = "postmark-hooks", "hook-password-of-the-test"
UNSUBSCRIBE = "<https://tidings.example.com/u/OPAQUE>, <mailto:u+OPAQUE@tidings.example.com>"


def make_message(address: str = "ada@example.com", **changes: Any) -> Message:
    content = Content(subject="Your order", text="Thanks.", html="<p>Thanks.</p>")
    return message(Channel.EMAIL, address, changes.pop("content", content), **changes)


def sim_config(tmp_path: Path, **changes: Any) -> SimulatorConfig:
    fields: dict[str, Any] = {
        "credentials_dir": tmp_path / "credentials",
        "postmark_server_token": TOKEN,
        "postmark_senders": ["tidings.example.com"],
        "postmark_webhook_username": HOOK_USER,
        "postmark_webhook_password": HOOK_PASSWORD,
    }
    return SimulatorConfig(**(fields | changes))


@pytest.fixture
async def sim(tmp_path: Path) -> AsyncIterator[Simulator]:
    async with Simulator(sim_config(tmp_path)) as simulator:
        yield simulator


def account(sim: Simulator, **changes: Any) -> PostmarkAccount:
    fields: dict[str, Any] = {
        "server_token": TOKEN,
        "base_url": sim.url,
        "from_email": "noreply@tidings.example.com",
        "from_name": "Tidings",
        "webhook_username": HOOK_USER,
        "webhook_password": HOOK_PASSWORD,
        "timeout": 5,
    }
    return PostmarkAccount.model_validate(fields | changes)


@pytest.fixture
async def provider(sim: Simulator) -> AsyncIterator[PostmarkProvider]:
    adapter = PostmarkProvider("postmark-main", account(sim))
    yield adapter
    await adapter.close()


# --- The adapter ---------------------------------------------------------------------------


async def test_sends_the_documented_body(sim: Simulator, provider: PostmarkProvider) -> None:
    headers = {
        "List-Unsubscribe": UNSUBSCRIBE,
        "List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
        "To": "not ours to set",
    }
    message = make_message(type="newsletter", category="marketing", headers=headers)

    result = await provider.send(message)

    [received] = sim.state("postmark").received
    answer = sim.state("postmark").answers[str(message.delivery_id)]
    assert result.provider == "postmark-main"
    assert result.provider_msg_id == answer["MessageID"]
    assert set(answer) == {"To", "SubmittedAt", "MessageID", "ErrorCode", "Message"}
    assert (answer["ErrorCode"], answer["Message"]) == (0, "OK")
    assert received.idempotency_key == str(message.delivery_id)
    assert received.payload == {
        "From": "Tidings <noreply@tidings.example.com>",
        "To": "ada@example.com",
        "Subject": "Your order",
        "TextBody": "Thanks.",
        "HtmlBody": "<p>Thanks.</p>",
        "Tag": "newsletter",
        "Metadata": {"tidings_delivery_id": str(message.delivery_id)},
        "MessageStream": "broadcast",  # marketing: Postmark's broadcasts stream
        "Headers": [
            {"Name": "List-Unsubscribe", "Value": UNSUBSCRIBE},
            {"Name": "List-Unsubscribe-Post", "Value": "List-Unsubscribe=One-Click"},
        ],
    }


async def test_the_stream_follows_the_category_and_the_account(sim: Simulator) -> None:
    adapter = PostmarkProvider("pm", account(sim, message_streams={"reminder": "reminders"}))
    try:
        for category in ("transactional", "reminder", "marketing"):
            await adapter.send(make_message(category=category, content=Content(text="only")))
    finally:
        await adapter.close()

    received = sim.state("postmark").received
    assert [r.payload["MessageStream"] for r in received] == ["outbound", "reminders", "broadcast"]
    assert all("HtmlBody" not in r.payload and "Headers" not in r.payload for r in received)


async def test_the_types_sender_reply_to_and_copies(
    sim: Simulator, provider: PostmarkProvider
) -> None:
    sender = EmailSender("billing@tidings.example.com", "Billing")
    cc, bcc = ("boss@example.com", "ADA@example.com"), ("boss@example.com", "x@a.io")
    await provider.send(make_message(sender=sender, reply_to="help@example.com", cc=cc, bcc=bcc))

    [received] = sim.state("postmark").received
    assert received.payload["From"] == "Billing <billing@tidings.example.com>"
    assert received.payload["ReplyTo"] == "help@example.com"
    # Neither the recipient nor an address twice.
    assert (received.payload["Cc"], received.payload["Bcc"]) == ("boss@example.com", "x@a.io")


def test_account_settings_are_checked() -> None:
    fields = {"server_token": "t", "from_email": "a@example.com"}
    with pytest.raises(ValidationError, match="together"):
        PostmarkAccount.model_validate(fields | {"webhook_username": "only-the-user"})
    with pytest.raises(ValidationError, match="unknown categories"):
        PostmarkAccount.model_validate(fields | {"message_streams": {"promo": "x"}})
    assert PostmarkAccount.model_validate(fields).webhook_password is None


async def test_an_email_without_a_body_is_poison_and_not_sent(
    sim: Simulator, provider: PostmarkProvider
) -> None:
    with pytest.raises(PoisonError) as raised:
        await provider.send(make_message(content=Content(subject="Hi")))
    assert raised.value.reason == "empty_content"
    assert sim.state("postmark").counts["requests"] == 0


async def test_an_inactive_recipient_is_permanent_and_suppressed(
    sim: Simulator, provider: PostmarkProvider
) -> None:
    """406: Postmark will not mail the address (it bounced, complained or was suppressed
    there); tidings suppresses it too. The simulator marks a hard bounce inactive."""
    state = sim.state("postmark")
    state.behaviour = state.behaviour.model_copy(update={"reports": {"bounce": 1.0}})
    await provider.send(make_message("gone@example.com"))

    with pytest.raises(PermanentError) as raised:
        await provider.send(make_message("gone@example.com"))

    assert raised.value.effect is Effect.SUPPRESS_ADDRESS
    assert raised.value.reason == "inactive_recipient"
    assert "Found inactive addresses: gone@example.com" in str(raised.value)


def test_a_429_waits_for_retry_after() -> None:
    response = httpx.Response(429, headers={"Retry-After": "7"}, json={"ErrorCode": 429})
    error = classify(response, time.time())
    assert (error.reason, error.retry_after) == ("rate_limited", 7.0)


# --- The simulator ---------------------------------------------------------------------------


async def test_the_simulator_checks_like_postmark(sim: Simulator) -> None:
    good = {"From": "a@tidings.example.com", "To": "b@example.com", "TextBody": "t"}
    headers = {"X-Postmark-Server-Token": TOKEN, "Accept": "application/json"}
    async with httpx.AsyncClient(base_url=sim.url) as client:
        missing = await client.post("/email", json=good)
        wrong = await client.post("/email", json=good, headers={"X-Postmark-Server-Token": "x"})
        not_json = await client.post("/email", data=good, headers=headers)
        broken = await client.post(
            "/email", content=b"{", headers=headers | {"Content-Type": "application/json"}
        )
        no_to = await client.post("/email", json=good | {"To": ""}, headers=headers)
        bad_to = await client.post("/email", json=good | {"To": "nobody"}, headers=headers)
        no_body = await client.post("/email", json=good | {"TextBody": ""}, headers=headers)
        shape = await client.post("/email", json=good | {"To": ["b@example.com"]}, headers=headers)
        ok = await client.post("/email", json=good, headers=headers)

    assert [r.status_code for r in (missing, wrong)] == [401, 401]
    assert {r.json()["ErrorCode"] for r in (missing, wrong)} == {10}
    assert "X-Postmark-Server-Token" in missing.json()["Message"]
    codes = [r.json()["ErrorCode"] for r in (not_json, broken, no_to, bad_to, no_body, shape)]
    assert codes == [409, 402, 300, 300, 300, 403]
    assert all(r.status_code == 422 for r in (not_json, broken, no_to, bad_to, no_body, shape))
    assert no_to.json()["Message"] == "Zero recipients specified"
    assert ok.status_code == 200 and ok.json()["ErrorCode"] == 0


def test_the_simulator_reads_postmark_on_its_own() -> None:
    for module in ("postmark/__init__", "postmark/api", "postmark/events"):
        assert provider_imports(module) == [], module


# --- The webhook, through the API ----------------------------------------------------------


@pytest.fixture
def accounts(service: Service, sim: Simulator) -> None:
    found = {
        "pm": account(sim),
        "pm-open": account(sim, webhook_username=None, webhook_password=None),
    }
    service.settings = service.settings.model_copy(update={"accounts": found})


def basic(user: str, password: str) -> dict[str, str]:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


async def post_record(
    client: httpx.AsyncClient,
    record: Any,
    account: str = "pm",
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    auth = basic(HOOK_USER, HOOK_PASSWORD) if headers is None else headers
    return await client.post(f"/v1/webhooks/postmark/{account}", json=record, headers=auth)


def record(sim: Simulator, address: str, record_type: str, **fields: Any) -> dict[str, Any]:
    """A record as Postmark posts it for the message the simulator got for ``address``."""
    [received] = [r for r in sim.state("postmark").received if r.address == address]
    answer = sim.state("postmark").answers[str(received.idempotency_key)]
    return {
        "RecordType": record_type,
        "MessageID": answer["MessageID"],
        "MessageStream": "outbound",
        "Metadata": received.payload["Metadata"],
        "ServerID": 23,
        "Tag": "order.confirmed",
        **fields,
    }


def bounce(sim: Simulator, address: str, bounce_type: str, type_code: int) -> dict[str, Any]:
    return record(
        sim,
        address,
        "Bounce",
        ID=uuid.uuid4().int % 10**12,
        Type=bounce_type,
        TypeCode=type_code,
        Email=address,
        BouncedAt="2026-11-30T12:00:01.1234567Z",
        Details="smtp;550 5.1.1 no such user",
        Inactive=bounce_type == "HardBounce",
    )


async def send(
    client: httpx.AsyncClient, service: Service, sim: Simulator, *addresses: str
) -> dict[str, dict[str, Any]]:
    return await send_emails(client, service, PostmarkProvider("pm", account(sim)), *addresses)


@pytest.mark.usefixtures("accounts")
async def test_records_update_deliveries_history_and_suppressions(
    client: httpx.AsyncClient, service: Service, sim: Simulator
) -> None:
    names = ("ana", "bob", "cy", "dee", "ed", "fay")
    sent = await send(client, service, sim, *(f"{n}@example.com" for n in names))
    ana, bob, cy, dee, ed, fay = (f"{n}@example.com" for n in names)
    delivered = record(sim, ana, "Delivery", Recipient=ana, DeliveredAt="2026-11-30T12:00:00Z")
    by_message_id = record(sim, fay, "Delivery", Recipient=fay)
    del by_message_id["Metadata"]  # found by MessageID instead
    hard = bounce(sim, bob, "HardBounce", 1)
    complaint = bounce(sim, dee, "SpamComplaint", 100001) | {"RecordType": "SpamComplaint"}
    unsubscribed = record(
        sim,
        ed,
        "SubscriptionChange",
        Recipient=ed,
        ChangedAt="2026-11-30T12:00:02Z",
        Origin="Recipient",
        SuppressSending=True,
        SuppressionReason="ManualSuppression",
    )
    records = [
        delivered,
        record(sim, ana, "Open", Recipient=ana, ReceivedAt="2026-11-30T12:01:00Z"),
        record(sim, ana, "Click", Recipient=ana, OriginalLink="https://shop.example.com/o/7"),
        record(sim, ana, "Inbound"),  # not one tidings records
        delivered,  # Postmark retried
        hard,
        record(sim, bob, "Delivery", Recipient=bob),  # out of order: must not undo it
        bounce(sim, cy, "SoftBounce", 4096),
        complaint,
        unsubscribed,
        by_message_id,
    ]
    answers = [(await post_record(client, r)).json() for r in records]
    assert [a["applied"] for a in answers] == [1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 1]
    assert answers[3]["ignored"] == 1 and answers[4]["duplicates"] == 1

    statuses = {a: (await delivery(client, s))["status"] for a, s in sent.items()}
    assert statuses == {
        ana: "DELIVERED",
        bob: "BOUNCED",
        cy: "SENT",
        dee: "SENT",
        ed: "SENT",
        fay: "DELIVERED",
    }
    history = await delivery(client, sent[ana])
    assert kinds(history).count("delivered") == 1 and {"opened", "clicked"} <= set(kinds(history))
    [click] = [e for e in history["history"] if e["kind"] == "clicked"]
    assert click["detail"]["url"] == "https://shop.example.com/o/7"
    [bounced] = [
        e for e in (await delivery(client, sent[bob]))["history"] if e["kind"] == "bounced"
    ]
    assert bounced["detail"]["Type"] == "HardBounce"
    assert bounced["at"].startswith("2026-11-30T12:00:01.123456")  # Postmark's BouncedAt
    assert "soft_bounced" in kinds(await delivery(client, sent[cy]))
    reasons = {address: await suppression(client, address) for address in sent}
    assert reasons == {
        ana: None,
        bob: "hard_bounce",
        cy: None,
        dee: "complaint",
        ed: "unsubscribed",
        fay: None,
    }


@pytest.mark.usefixtures("accounts")
async def test_only_the_accounts_credentials_are_accepted(
    client: httpx.AsyncClient, service: Service, sim: Simulator
) -> None:
    sent = await send(client, service, sim, "ana@example.com")
    hard = bounce(sim, "ana@example.com", "HardBounce", 1)
    for headers in (
        {},
        basic(HOOK_USER, "wrong"),
        basic("someone", HOOK_PASSWORD),
        {"Authorization": f"Bearer {HOOK_PASSWORD}"},
        {"Authorization": "Basic !!!"},
    ):
        response = await post_record(client, hard, headers=headers)
        assert response.status_code == 401, response.text
        assert response.headers["www-authenticate"].startswith("Basic")
    assert (await delivery(client, sent["ana@example.com"]))["status"] == "SENT"
    assert await suppression(client, "ana@example.com") is None

    assert (await post_record(client, hard)).status_code == 200
    assert (await delivery(client, sent["ana@example.com"]))["status"] == "BOUNCED"
    assert await suppression(client, "ana@example.com") == "hard_bounce"


@pytest.mark.usefixtures("accounts")
async def test_unauthenticated_for_an_open_account_and_malformed(
    client: httpx.AsyncClient,
) -> None:
    """Unknown accounts, and genuine credentials for an open one: tests/integration/contract."""
    # An account without credentials never takes unauthenticated records.
    response = await post_record(client, {}, account="pm-open", headers={})
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "webhook_not_configured"
    for body in (b"not json", b"[1, 2]"):
        response = await client.post(
            "/v1/webhooks/postmark/pm", content=body, headers=basic(HOOK_USER, HOOK_PASSWORD)
        )
        assert response.status_code == 400, response.text


# --- The whole loop: the simulator posts its own records to tidings --------------------------


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
async def test_the_simulators_records_end_as_postmark_said(
    service: Service, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    """A hard bounce, a complaint, an unsubscription and a delivery, posted by the simulator
    with the credentials of its webhook URL; then a send to the bounced address, which
    tidings no longer makes (suppressed)."""
    port = free_port()
    url = f"http://{HOOK_USER}:{HOOK_PASSWORD}@127.0.0.1:{port}/v1/webhooks/postmark/pm"
    config = sim_config(
        tmp_path,
        postmark_webhook_url=url,
        postmark_webhook_username="unused",  # the URL's credentials win
        # Later than tidings writes SENT, even on a busy machine: an event that outruns it
        # is recorded but moves nothing.
        behaviours={"postmark": Behaviour(report_delay_ms=1000)},
    )
    outcomes = {"ana@example.com": "delivered", "bob@example.com": "bounce"}
    outcomes |= {"cy@example.com": "complaint", "dee@example.com": "unsubscribe"}
    await put_type(client, channels=("email",))
    async with Simulator(config) as sim, api_on(service, port):
        service.settings = service.settings.model_copy(update={"accounts": {"pm": account(sim)}})
        state = sim.state("postmark")
        provider = PostmarkProvider("pm", account(sim))
        async with running_dispatcher(service, provider):
            sent = await send_one_by_one(client, state, outcomes)
            again = await post(client, email_to("bob@example.com"))
            await eventually(lambda: status_is(client, again.json()["id"], "SKIPPED"))
        await provider.close()
        assert state.counts["reports_failed"] == 0
        assert dict(state.reports) == outcomes

    statuses = [(await delivery(client, s))["status"] for s in sent]
    assert statuses == ["DELIVERED", "BOUNCED", "DELIVERED", "DELIVERED"]
    reasons = {address: await suppression(client, address) for address in outcomes}
    assert reasons == {
        "ana@example.com": None,
        "bob@example.com": "hard_bounce",
        "cy@example.com": "complaint",
        "dee@example.com": "unsubscribed",
    }
    assert len(sim.state("postmark").received) == 4  # the fifth was never sent
