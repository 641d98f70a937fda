"""Mailgun: the adapter against the simulated Messages API over loopback HTTP, and the
signed event webhook end to end (through the API, and posted by the simulator itself)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

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
    PoisonError,
)
from tidings.providers.mailgun import MailgunAccount, MailgunProvider
from tidings.providers.mailgun import signature as mailgun_signature
from tidings.providers.mailgun.errors import classify
from tidings.service import Service
from tidings.simulator.behaviour import Behaviour
from tidings.simulator.server import Simulator, SimulatorConfig
from tidings.store import tracking

KEY = "key-test-mailgun"
DOMAIN = "mg.tidings.example.com"
SIGNING_KEY = "signing-key-of-the-test"
UNSUBSCRIBE = "<https://tidings.example.com/u/OPAQUE>, <mailto:u+OPAQUE@tidings.example.com>"


def make_message(address: str = "ada@example.com", **changes: Any) -> Message:
    content = Content(subject="Your order", text="Thanks.", html="<p>Thanks.</p>")
    return message(Channel.EMAIL, address, changes.pop("content", content), **changes)


def sim_config(tmp_path: Path, **changes: Any) -> SimulatorConfig:
    fields: dict[str, Any] = {
        "credentials_dir": tmp_path / "credentials",
        "mailgun_api_key": KEY,
        "mailgun_domains": [DOMAIN],
        "mailgun_webhook_signing_key": SIGNING_KEY,
    }
    return SimulatorConfig(**(fields | changes))


@pytest.fixture
async def sim(tmp_path: Path) -> AsyncIterator[Simulator]:
    async with Simulator(sim_config(tmp_path)) as simulator:
        yield simulator


def account(sim: Simulator, **changes: Any) -> MailgunAccount:
    fields: dict[str, Any] = {
        "api_key": SecretStr(KEY),
        "domain": DOMAIN,
        "base_url": sim.url,
        "from_email": "noreply@tidings.example.com",
        "from_name": "Tidings, Inc.",
        "webhook_signing_key": SecretStr(SIGNING_KEY),
        "timeout": 5,
    }
    return MailgunAccount(**(fields | changes))


@pytest.fixture
async def provider(sim: Simulator) -> AsyncIterator[MailgunProvider]:
    adapter = MailgunProvider("mailgun-main", account(sim))
    yield adapter
    await adapter.close()


# --- The adapter ---------------------------------------------------------------------------


async def test_sends_the_documented_form(sim: Simulator, provider: MailgunProvider) -> None:
    headers = {
        "List-Unsubscribe": UNSUBSCRIBE,
        "List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
        "Subject": "not ours to set",  # Mailgun's own parameter wins
    }
    message = make_message(type="newsletter", category="marketing", headers=headers)

    result = await provider.send(message)

    [received] = sim.state("mailgun").received
    answered = sim.state("mailgun").answers[str(message.delivery_id)]
    assert result.provider == "mailgun-main"
    assert result.provider_msg_id == answered.strip("<>")  # as webhook events carry it
    assert answered.startswith("<") and answered.endswith(f"@{DOMAIN}>")
    assert received.idempotency_key == str(message.delivery_id)
    assert received.payload == {
        "from": '"Tidings, Inc." <noreply@tidings.example.com>',
        "to": "ada@example.com",
        "subject": "Your order",
        "text": "Thanks.",
        "html": "<p>Thanks.</p>",
        "o:tag": "newsletter",
        "v:tidings_delivery_id": str(message.delivery_id),
        "h:List-Unsubscribe": UNSUBSCRIBE,
        "h:List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
    }


async def test_text_only_and_an_internationalised_domain(
    sim: Simulator, provider: MailgunProvider
) -> None:
    await provider.send(make_message("zoe@bücher.example", content=Content("Hi", "Plain")))

    [received] = sim.state("mailgun").received
    assert received.payload["to"] == "zoe@xn--bcher-kva.example"
    assert received.payload["text"] == "Plain" and "html" not in received.payload


async def test_the_types_sender_reply_to_and_copies(
    sim: Simulator, provider: MailgunProvider
) -> None:
    sender = EmailSender("billing@tidings.example.com", "Billing")
    cc, bcc = ("boss@example.com", "ADA@example.com"), ("boss@example.com", "x@a.io")
    await provider.send(make_message(sender=sender, reply_to="help@example.com", cc=cc, bcc=bcc))

    [received] = sim.state("mailgun").received
    assert received.payload["from"] == "Billing <billing@tidings.example.com>"
    assert received.payload["h:Reply-To"] == "help@example.com"
    # Neither the recipient nor an address twice: Mailgun would mail it twice.
    assert (received.payload["cc"], received.payload["bcc"]) == ("boss@example.com", "x@a.io")


@pytest.mark.parametrize(
    ("content", "reason"),
    [(Content(subject="Hi"), "empty_content"), (Content(subject="", text="x"), "empty_subject")],
)
async def test_what_mailgun_would_refuse_is_poison_and_not_sent(
    sim: Simulator, provider: MailgunProvider, content: Content, reason: str
) -> None:
    with pytest.raises(PoisonError) as raised:
        await provider.send(make_message(content=content))
    assert raised.value.reason == reason
    assert sim.state("mailgun").counts["requests"] == 0


def test_a_429_waits_for_retry_after() -> None:
    response = httpx.Response(429, headers={"Retry-After": "7"}, json={"message": "slow"})
    error = classify(response, time.time())
    assert (error.reason, error.retry_after) == ("rate_limited", 7.0)


# --- The simulator ---------------------------------------------------------------------------


async def test_the_simulator_checks_like_mailgun(sim: Simulator) -> None:
    url = f"{sim.url}/v3/{DOMAIN}/messages"
    good = {"from": "a@tidings.example.com", "to": "b@example.com", "subject": "s", "text": "t"}
    async with httpx.AsyncClient() as anonymous_client:
        anonymous = await anonymous_client.post(url, data=good)
    async with httpx.AsyncClient(auth=("api", KEY)) as client:
        wrong_user = await client.post(url, data=good, auth=("user", KEY))
        unknown = await client.post(f"{sim.url}/v3/nope.example.com/messages", data=good)
        no_from = await client.post(url, data=good | {"from": ""})
        bad_to = await client.post(url, data=good | {"to": "not-an-address"})
        no_body = await client.post(url, data={k: v for k, v in good.items() if k != "text"})
        multipart = await client.post(url, data=good, files={"attachment": ("a.txt", b"hi")})

    assert (anonymous.status_code, anonymous.text) == (401, "Forbidden")
    assert wrong_user.status_code == 401
    assert unknown.status_code == 404
    assert unknown.json() == {"message": "Domain not found: nope.example.com"}
    assert no_from.json() == {"message": "'from' parameter is missing"}
    assert bad_to.status_code == 400 and "not a valid address" in bad_to.json()["message"]
    assert no_body.status_code == 400 and "'text', 'html'" in no_body.json()["message"]
    assert multipart.status_code == 200, multipart.text
    assert multipart.json()["message"] == "Queued. Thank you."
    assert sim.state("mailgun").received[-1].payload["attachment"] == "a.txt"


def test_the_simulator_reads_mailgun_on_its_own() -> None:
    for module in ("mailgun/__init__", "mailgun/api", "mailgun/events", "form_data"):
        assert provider_imports(module) == [], module


# --- The webhook, through the API ----------------------------------------------------------


@pytest.fixture
def accounts(service: Service, sim: Simulator) -> None:
    found = {
        "mg": account(sim),
    }
    service.settings = service.settings.model_copy(update={"accounts": found})


async def send(
    client: httpx.AsyncClient, service: Service, sim: Simulator, *addresses: str
) -> dict[str, dict[str, Any]]:
    return await send_emails(client, service, MailgunProvider("mg", account(sim)), *addresses)


def event(sim: Simulator, address: str, name: str, **fields: Any) -> dict[str, Any]:
    """The ``event-data`` Mailgun would post for the message the simulator got for ``address``."""
    [received] = [r for r in sim.state("mailgun").received if r.address == address]
    message_id = sim.state("mailgun").answers[str(received.idempotency_key)]
    return {
        "event": name,
        "id": uuid.uuid4().hex[:22],
        "timestamp": time.time(),
        "recipient": address,
        "message": {"headers": {"message-id": message_id.strip("<>")}},
        "user-variables": {"tidings_delivery_id": received.idempotency_key},
        **fields,
    }


async def post_event(
    client: httpx.AsyncClient,
    data: Any,
    account: str = "mg",
    signature: dict[str, str] | None = None,
) -> httpx.Response:
    signed = signature or mailgun_signature.sign(SIGNING_KEY, int(time.time()))
    body = json.dumps({"signature": signed, "event-data": data})
    headers = {"Content-Type": "application/json"}
    return await client.post(f"/v1/webhooks/mailgun/{account}", content=body, headers=headers)


@pytest.mark.usefixtures("accounts")
async def test_events_update_deliveries_history_and_suppressions(
    client: httpx.AsyncClient, service: Service, sim: Simulator
) -> None:
    names = ("ana", "bob", "cy", "dee", "ed", "fay", "gus")
    sent = await send(client, service, sim, *(f"{n}@example.com" for n in names))
    ana, bob, cy, dee, ed, fay, gus = (f"{n}@example.com" for n in names)
    by_message_id = event(sim, fay, "delivered")
    del by_message_id["user-variables"]  # found by message.headers.message-id instead
    permanent = {"severity": "permanent", "reason": "bounce"}
    status = {"code": 550, "message": "5.1.1 no such user", "description": ""}
    delivered = event(sim, ana, "delivered")
    events = [
        delivered,
        event(sim, ana, "opened"),
        event(sim, ana, "clicked", url="https://shop.example.com/orders/7"),
        event(sim, ana, "accepted"),  # nothing tidings records
        delivered,  # Mailgun retried: the same event id again
        event(sim, bob, "failed", **permanent, **{"delivery-status": status}),
        event(sim, bob, "delivered"),  # out of order: must not undo the bounce
        event(sim, cy, "failed", severity="temporary", reason="generic"),
        event(sim, dee, "complained"),
        event(sim, ed, "unsubscribed"),
        by_message_id,
        event(sim, gus, "failed", severity="permanent", reason="suppress-complaint"),
    ]
    answers = [(await post_event(client, data)).json() for data in events]
    assert [a["applied"] for a in answers] == [1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 1, 1]
    assert answers[3]["ignored"] == 1 and answers[4]["duplicates"] == 1

    statuses = {a: (await delivery(client, s))["status"] for a, s in sent.items()}
    assert statuses == {
        ana: "DELIVERED",
        bob: "BOUNCED",
        cy: "SENT",
        dee: "SENT",
        ed: "SENT",
        fay: "DELIVERED",
        gus: "BOUNCED",
    }
    history = await delivery(client, sent[ana])
    assert kinds(history).count("delivered") == 1 and {"opened", "clicked"} <= set(kinds(history))
    [click] = [e for e in history["history"] if e["kind"] == "clicked"]
    assert click["detail"]["url"] == "https://shop.example.com/orders/7"
    [bounce] = [e for e in (await delivery(client, sent[bob]))["history"] if e["kind"] == "bounced"]
    assert bounce["detail"]["code"] == 550 and bounce["detail"]["severity"] == "permanent"
    assert "deferred" in kinds(await delivery(client, sent[cy]))
    reasons = {address: await suppression(client, address) for address in sent}
    assert reasons == {
        ana: None,
        bob: "hard_bounce",
        cy: None,
        dee: "complaint",
        ed: "unsubscribed",
        fay: None,
        gus: "complaint",  # Mailgun dropped it: the address had complained before
    }


@pytest.mark.usefixtures("accounts")
async def test_forged_stale_replayed_and_unsigned_requests_are_refused(
    client: httpx.AsyncClient, service: Service, sim: Simulator
) -> None:
    sent = await send(client, service, sim, "ana@example.com")
    bounce = event(sim, "ana@example.com", "failed", severity="permanent", reason="bounce")
    now = int(time.time())
    forged = mailgun_signature.sign("another-key", now)
    stale = mailgun_signature.sign(SIGNING_KEY, now - 301)
    tampered = mailgun_signature.sign(SIGNING_KEY, now) | {"timestamp": str(now + 1)}
    for signature in (forged, stale, tampered):
        response = await post_event(client, bounce, signature=signature)
        assert response.status_code == 401, response.text
        assert response.json()["error"]["code"] == "invalid_signature"
    no_signature = await client.post("/v1/webhooks/mailgun/mg", json={"event-data": bounce})
    assert no_signature.status_code == 401
    assert (await delivery(client, sent["ana@example.com"]))["status"] == "SENT"

    # A captured signature is accepted once: the body is not signed, so a replay with
    # other event data must not pass either. 406 tells Mailgun not to retry.
    signature = mailgun_signature.sign(SIGNING_KEY, now)
    delivered = event(sim, "ana@example.com", "delivered")
    assert (await post_event(client, delivered, signature=signature)).status_code == 200
    replayed = await post_event(client, bounce, signature=signature)
    assert replayed.status_code == 406 and replayed.json()["error"]["code"] == "replayed"
    assert (await delivery(client, sent["ana@example.com"]))["status"] == "DELIVERED"
    assert await suppression(client, "ana@example.com") is None


@pytest.mark.usefixtures("accounts")
async def test_a_request_that_could_not_be_written_may_come_again(
    client: httpx.AsyncClient, service: Service, sim: Simulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failure while applying releases the token, so that Mailgun's retry of that very
    request is not refused as a replay."""
    sent = await send(client, service, sim, "ana@example.com")
    signature = mailgun_signature.sign(SIGNING_KEY, int(time.time()))
    delivered = event(sim, "ana@example.com", "delivered")

    async def broken(*args: Any) -> Any:
        raise RuntimeError("database gone")

    with monkeypatch.context() as patched:
        patched.setattr(tracking, "apply", broken)
        with pytest.raises(RuntimeError):
            await post_event(client, delivered, signature=signature)
    again = await post_event(client, delivered, signature=signature)
    assert again.status_code == 200 and again.json()["applied"] == 1
    assert (await delivery(client, sent["ana@example.com"]))["status"] == "DELIVERED"


@pytest.mark.usefixtures("accounts")
async def test_malformed_requests_are_refused(client: httpx.AsyncClient) -> None:
    """Unknown and unconfigured accounts: tests/integration/contract/test_inbound.py."""
    for body in (b"not json", b"[1, 2]"):
        response = await client.post("/v1/webhooks/mailgun/mg", content=body)
        assert response.status_code == 400, response.text
    not_an_event = await post_event(client, ["delivered"])
    assert not_an_event.status_code == 406  # signed, but nothing to do: no retry


# --- The whole loop: the simulator posts its own signed events to tidings -------------------


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
async def test_the_simulators_events_end_as_mailgun_said(
    service: Service, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    """A bounce, a complaint and a delivery, posted and signed by the simulator; then a send
    to the bounced address, which tidings no longer makes (suppressed)."""
    port = free_port()
    config = sim_config(
        tmp_path,
        mailgun_webhook_url=f"http://127.0.0.1:{port}/v1/webhooks/mailgun/mg",
        # Later than tidings writes SENT, even on a busy machine: an event that outruns it
        # is recorded but moves nothing.
        behaviours={"mailgun": Behaviour(report_delay_ms=1000)},
    )
    outcomes = {"ana@example.com": "delivered", "bob@example.com": "bounce"}
    outcomes["cy@example.com"] = "complaint"
    await put_type(client, channels=("email",))
    async with Simulator(config) as sim, api_on(service, port):
        service.settings = service.settings.model_copy(update={"accounts": {"mg": account(sim)}})
        state = sim.state("mailgun")
        provider = MailgunProvider("mg", account(sim))
        async with running_dispatcher(service, provider):
            sent = await send_one_by_one(client, state, outcomes)
            again = await post(client, email_to("bob@example.com"))
            await eventually(lambda: status_is(client, again.json()["id"], "SKIPPED"))
        await provider.close()
        assert state.counts["reports_failed"] == 0
        assert dict(state.reports) == outcomes

    statuses = [(await delivery(client, s))["status"] for s in sent]
    assert statuses == ["DELIVERED", "BOUNCED", "DELIVERED"]
    assert await suppression(client, "bob@example.com") == "hard_bounce"
    assert await suppression(client, "cy@example.com") == "complaint"
    assert await suppression(client, "ana@example.com") is None
    assert len(sim.state("mailgun").received) == 3  # the fourth was never sent
