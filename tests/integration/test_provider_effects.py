"""Real adapters behind the real dispatcher, against the simulator: what a permanent error
does to the address (device deactivated, address suppressed), and the raw headers of
marketing and transactional email (RFC 8058)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
import sqlalchemy as sa
from pydantic import SecretStr

from tests.helpers import eventually, post, put_type
from tidings.assembly import assemble_dispatcher
from tidings.dispatch.dispatcher import Dispatcher
from tidings.providers.accounts import AccountSettings
from tidings.providers.apns import ApnsAccount
from tidings.providers.fcm import FcmAccount
from tidings.providers.smtp import SmtpAccount
from tidings.providers.webhook import WebhookAccount
from tidings.service import Service, providers_from_settings
from tidings.simulator.apns import ApnsSimulator
from tidings.simulator.fcm import FcmSimulator
from tidings.simulator.server import Simulator, SimulatorConfig
from tidings.simulator.smtp import SmtpServer
from tidings.states import Effect, Status
from tidings.store import users
from tidings.store.effects import apply_effects
from tidings.store.engine import Database
from tidings.store.outcomes import Outcome
from tidings.store.schema import delivery

DEVICE = "ab" * 32  # APNs device tokens are hex


@pytest.fixture
async def sim(tmp_path: Path) -> AsyncIterator[Simulator]:
    async with Simulator(SimulatorConfig(credentials_dir=tmp_path / "credentials")) as simulator:
        yield simulator


@contextlib.asynccontextmanager
async def dispatching(
    service: Service, accounts: dict[str, AccountSettings], chains: dict[str, list[str]]
) -> AsyncIterator[Dispatcher]:
    """A dispatcher sending through real adapters built from these accounts."""
    settings = service.settings.model_copy(update={"accounts": accounts, "providers": chains})
    service.settings = settings  # the API and the dispatcher share one configuration
    providers = providers_from_settings(settings)
    dispatcher = assemble_dispatcher(service, providers)
    stop = asyncio.Event()
    task = asyncio.create_task(dispatcher.run(stop))
    try:
        yield dispatcher
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=30)
        await providers.close()


def apns_account(sim: Simulator) -> ApnsAccount:
    apns = sim.http["apns"]
    assert isinstance(apns, ApnsSimulator)
    return ApnsAccount.model_validate(apns.account())


def fcm_account(sim: Simulator) -> FcmAccount:
    fcm = sim.http["fcm"]
    assert isinstance(fcm, FcmSimulator)
    return FcmAccount.model_validate(fcm.account())


def smtp_account(sim: Simulator) -> SmtpAccount:
    server = sim.servers["smtp"]
    assert isinstance(server, SmtpServer)
    return SmtpAccount(
        host="127.0.0.1",
        port=server.port,
        tls="starttls",
        username=sim.config.smtp_username,
        password=SecretStr(sim.config.smtp_password),
        from_address="noreply@tidings.example.com",
        ca_file=server.cert_file,
        timeout=5,
    )


async def settled(client: httpx.AsyncClient, notification_id: str) -> dict[str, Any] | None:
    shown = (await client.get(f"/v1/notifications/{notification_id}")).json()
    pending = ("PENDING", "SENDING")
    return None if any(d["status"] in pending for d in shown["deliveries"]) else shown


async def send_and_settle(client: httpx.AsyncClient, body: dict[str, Any]) -> dict[str, Any]:
    response = await post(client, body)
    assert response.status_code == 202, response.text
    notification_id = response.json()["id"]
    try:
        found: dict[str, Any] = await eventually(lambda: settled(client, notification_id))
    except AssertionError:
        shown = (await client.get(f"/v1/notifications/{notification_id}")).json()
        raise AssertionError(f"not settled: {shown['deliveries']}") from None
    return found


async def test_an_unregistered_apns_token_deactivates_the_device(
    service: Service, client: httpx.AsyncClient, sim: Simulator
) -> None:
    await put_type(client, "order.shipped", channels=("push",))
    device = {"userId": "ana", "platform": "ios", "token": DEVICE}
    assert (await client.post("/v1/devices", json=device)).status_code == 201
    sim.state("apns").script(DEVICE, "Unregistered")
    apns = apns_account(sim)
    async with dispatching(service, {"apns-sim": apns}, {"push": ["apns-sim"]}):
        shown = await send_and_settle(client, {"type": "order.shipped", "userId": "ana"})
        [delivery] = shown["deliveries"]
        assert (delivery["status"], delivery["failureKind"]) == ("FAILED", "permanent")
        assert delivery["provider"] == "apns-sim"
        registered = await eventually(
            lambda: _inactive(client, "ana"), within=5
        )  # the effect is written with the outcome batch
        assert registered["deactivatedReason"] == "Unregistered"
        # Never sent to again: the next notification finds no active device.
        again = await post(client, {"type": "order.shipped", "userId": "ana"})
        assert again.status_code == 422
        assert again.json()["error"]["code"] == "no_address"
    assert sim.state("apns").summary()["received"] == 0


async def _inactive(client: httpx.AsyncClient, user_id: str) -> dict[str, Any] | None:
    shown = (await client.get(f"/v1/devices/{DEVICE}")).json()
    return None if shown.get("active", True) else shown


async def test_a_token_registered_after_apples_timestamp_stays_active(
    service: Service, client: httpx.AsyncClient, sim: Simulator
) -> None:
    """APNs' 410 says when it last confirmed the token invalid: a device that registered the
    token after that keeps it (Apple: it must get pushes again); one registered before
    loses it."""
    await put_type(client, "order.shipped", channels=("push",))
    device = {"userId": "ana", "platform": "ios", "token": DEVICE}
    assert (await client.post("/v1/devices", json=device)).status_code == 201
    apns = sim.http["apns"]
    assert isinstance(apns, ApnsSimulator)
    apns.unregister(DEVICE, at=time.time() - 3600)  # an hour before the registration
    async with dispatching(service, {"apns-sim": apns_account(sim)}, {"push": ["apns-sim"]}):
        shown = await send_and_settle(client, {"type": "order.shipped", "userId": "ana"})
        assert shown["deliveries"][0]["failureKind"] == "permanent"
        # The outcome and its effect are written in one transaction: both are in by now.
        kept = (await client.get(f"/v1/devices/{DEVICE}")).json()
        assert (kept["active"], kept["deactivatedReason"]) == (True, None)

        apns.unregister(DEVICE)  # confirmed invalid now, after the registration
        await send_and_settle(client, {"type": "order.shipped", "userId": "ana"})
        gone = await eventually(lambda: _inactive(client, "ana"), within=5)
        assert gone["deactivatedReason"] == "Unregistered"


async def test_a_deactivation_with_a_time_spares_a_device_registered_after_it(
    client: httpx.AsyncClient, db: Database
) -> None:
    """The store's side, at the boundary: registered after the time (by a millisecond)
    keeps the token; registered at or before it, or a deactivation without a time, not."""
    await put_type(client, "order.shipped", channels=("push",))
    registered = datetime(2031, 5, 6, 7, 8, 9, 123000, tzinfo=UTC)
    tokens = {"after": "a1" * 32, "same": "b2" * 32, "untimed": "c3" * 32}
    for token in tokens.values():
        await users.put_device(db, token, "ana", "ios", registered)
    accepted = await post(client, {"type": "order.shipped", "userId": "ana"})
    assert accepted.status_code == 202, accepted.text
    async with db.engine.connect() as conn:
        rows = await conn.execute(sa.select(delivery.c.address, delivery.c.id))
        deliveries = {row.address: row.id for row in rows}
    since = {
        "after": registered - timedelta(milliseconds=1),
        "same": registered,
        "untimed": None,
    }
    outcomes = [
        Outcome(
            delivery_id=deliveries[tokens[name]],
            claimed_attempts=1,
            status=Status.FAILED,
            attempts=1,
            effect=Effect.DEACTIVATE_DEVICE,
            effect_reason="Unregistered",
            effect_at=at,
        )
        for name, at in since.items()
    ]
    async with db.engine.begin() as conn:
        await apply_effects(db, conn, outcomes, registered + timedelta(hours=1))

    found = {name: await users.get_device(db, token) for name, token in tokens.items()}
    assert {name: d.active for name, d in found.items() if d is not None} == {
        "after": True,
        "same": False,
        "untimed": False,
    }


async def test_an_apns_send_succeeds_with_the_apns_id(
    service: Service, client: httpx.AsyncClient, sim: Simulator
) -> None:
    await put_type(client, "order.shipped", priority="high", channels=("push",))
    device = {"userId": "ana", "platform": "ios", "token": DEVICE}
    await client.post("/v1/devices", json=device)
    apns = apns_account(sim)
    async with dispatching(service, {"apns-sim": apns}, {"push": ["apns-sim"]}):
        shown = await send_and_settle(
            client, {"type": "order.shipped", "userId": "ana", "data": {"order": 7}}
        )
    [delivery] = shown["deliveries"]
    assert delivery["status"] == "SENT"
    assert delivery["providerMessageId"] == delivery["id"]  # apns-id is the delivery id
    [received] = sim.state("apns").received
    assert received.payload["headers"]["apns-priority"] == "10"
    assert received.payload["body"]["aps"]["alert"]["body"] == 'data: {"order": 7}'


async def test_a_hard_bounce_suppresses_the_address(
    service: Service, client: httpx.AsyncClient, sim: Simulator
) -> None:
    await put_type(client, "order.confirmed", channels=("email",))
    sim.state("smtp").script("gone@example.com", "5.1.1")
    body = {"type": "order.confirmed", "to": {"email": "gone@example.com"}}
    async with dispatching(service, {"smtp-sim": smtp_account(sim)}, {"email": ["smtp-sim"]}):
        shown = await send_and_settle(client, body)
        assert shown["deliveries"][0]["failureKind"] == "permanent"
        suppressed = await eventually(lambda: _suppression(client, "gone@example.com"), within=5)
        assert suppressed["reason"] == "hard_bounce"
    again = await post(client, body)
    assert again.json()["deliveries"][0]["status"] == "SKIPPED"
    shown = (await client.get(f"/v1/notifications/{again.json()['id']}")).json()
    assert shown["deliveries"][0]["skipReason"] == "suppressed"


async def _suppression(
    client: httpx.AsyncClient, address: str, channel: str = "email"
) -> dict[str, Any] | None:
    response = await client.get(f"/v1/suppressions/{channel}/{quote(address, safe='')}")
    return response.json() if response.status_code == 200 else None


async def test_marketing_email_raw_headers_carry_one_click_unsubscribe(
    service: Service, client: httpx.AsyncClient, sim: Simulator
) -> None:
    """RFC 8058: both headers in a marketing email as it crossed SMTP; neither in a
    transactional one."""
    await put_type(client, "promo", category="marketing", priority="low", channels=("email",))
    await put_type(client, "receipt", channels=("email",))
    async with dispatching(service, {"smtp-sim": smtp_account(sim)}, {"email": ["smtp-sim"]}):
        for kind in ("promo", "receipt"):
            shown = await send_and_settle(
                client, {"type": kind, "to": {"email": f"{kind}@example.com"}}
            )
            assert shown["deliveries"][0]["status"] == "SENT"
    raw = {r.address: r.payload["raw"] for r in sim.state("smtp").received}
    marketing, transactional = raw["promo@example.com"], raw["receipt@example.com"]
    assert "\r\nList-Unsubscribe: <http://127.0.0.1:8000/u/" in marketing
    assert "\r\nList-Unsubscribe-Post: List-Unsubscribe=One-Click\r\n" in marketing
    assert "List-Unsubscribe" not in transactional
    assert "X-Tidings-Delivery-Id:" in transactional


async def test_the_providers_endpoint_shows_chains_and_breakers(
    service: Service, client: httpx.AsyncClient, sim: Simulator
) -> None:
    async with dispatching(
        service, {"smtp-sim": smtp_account(sim)}, {"email": ["smtp-sim", "sink"]}
    ):
        shown = await eventually(lambda: _reported(client, "smtp-sim"), within=5)
    chains = shown["chains"]
    assert chains["email"] == ["smtp-sim", "sink"]
    account = next(a for a in shown["accounts"] if a["name"] == "smtp-sim")
    assert account["kind"] == "smtp" and account["channels"] == ["email"]
    assert account["breakers"][0]["state"]["state"] == "closed"
    assert "password" not in str(shown) and sim.config.smtp_password not in str(shown)


async def _reported(client: httpx.AsyncClient, name: str) -> dict[str, Any] | None:
    shown: dict[str, Any] = (await client.get("/v1/providers")).json()
    accounts = {a["name"]: a for a in shown["accounts"]}
    return shown if name in accounts and accounts[name]["breakers"] else None


async def test_the_webhook_channel_posts_a_signed_body_and_drops_a_gone_endpoint(
    service: Service, client: httpx.AsyncClient, sim: Simulator
) -> None:
    kind = {"category": "transactional", "priority": "normal", "channels": ["webhook"]}
    assert (await client.put("/v1/types/order.paid", json=kind)).status_code == 201
    # Each data key a template; a webhook template may also be empty (the data as is).
    body = {"data": {"order": "{{ order }}", "event": "order.paid"}}
    assert (await client.put("/v1/templates/order.paid/webhook/en", json=body)).is_success
    webhook = WebhookAccount(
        secret=SecretStr(sim.config.webhook_secret), allow_private=True, allow_insecure=True
    )
    url = f"{sim.url}/webhook-receiver/shop"
    gone = f"{sim.url}/webhook-receiver/old-shop"
    sim.state("webhook").script("old-shop", "410")  # the receiver knows it by its name
    notification = {"type": "order.paid", "to": {"webhookUrl": url}, "data": {"order": 9}}
    async with dispatching(service, {"hooks": webhook}, {"webhook": ["hooks"]}):
        sent = await send_and_settle(client, notification)
        failed = await send_and_settle(client, notification | {"to": {"webhookUrl": gone}})
        assert await eventually(lambda: _suppression(client, gone, "webhook"), within=5)
    [delivery] = sent["deliveries"]
    assert (delivery["status"], delivery["provider"]) == ("SENT", "hooks")
    assert delivery["address"] == f"{sim.url}/…"  # the path is masked
    [received] = sim.state("webhook").received
    assert received.payload["body"] == {"order": "9", "event": "order.paid"}
    assert received.idempotency_key == delivery["id"]  # webhook-id: the delivery id
    assert failed["deliveries"][0]["failureKind"] == "permanent"


async def test_ios_tokens_go_through_apns_and_the_rest_through_fcm(
    service: Service, client: httpx.AsyncClient, sim: Simulator
) -> None:
    """``push_ios`` routes iOS devices to their own chain; others use ``push``."""
    await put_type(client, "order.shipped", channels=("push",))
    android = "fcm-token:" + "x" * 40
    for platform, token in (("ios", DEVICE), ("android", android)):
        device = {"userId": "ana", "platform": platform, "token": token}
        assert (await client.post("/v1/devices", json=device)).status_code == 201
    accounts: dict[str, AccountSettings] = {
        "apns-sim": apns_account(sim),
        "fcm-sim": fcm_account(sim),
    }
    chains = {"push": ["fcm-sim"], "push_ios": ["apns-sim"]}
    async with dispatching(service, accounts, chains):
        shown = await send_and_settle(client, {"type": "order.shipped", "userId": "ana"})
    by_address = {d["address"][:6]: d for d in shown["deliveries"]}
    assert {d["status"] for d in by_address.values()} == {"SENT"}
    assert by_address[DEVICE[:6]]["provider"] == "apns-sim"
    assert by_address[android[:6]]["provider"] == "fcm-sim"
    assert [r.address for r in sim.state("apns").received] == [DEVICE]
    assert [r.address for r in sim.state("fcm").received] == [android]


def test_an_unknown_chain_name_is_refused(tmp_path: Path) -> None:
    from pydantic import ValidationError

    from tidings.settings import Settings

    with pytest.raises(ValidationError, match="unknown channel 'push_mac'"):
        Settings(providers={"push_mac": "sink"})
    with pytest.raises(ValidationError, match="no account named 'nope'"):
        Settings(providers={"push_ios": ["nope"]})


async def test_a_webhook_type_without_a_template_sends_the_data_as_is(
    service: Service, client: httpx.AsyncClient, sim: Simulator
) -> None:
    """The README's promise: a webhook needs no template; the notification's data is the
    JSON body the receiver gets."""
    await put_type(client, "user.created", channels=("webhook",), templates=False)
    webhook = WebhookAccount(
        secret=SecretStr(sim.config.webhook_secret), allow_private=True, allow_insecure=True
    )
    url = f"{sim.url}/webhook-receiver/crm"
    data = {"user": "u1", "plan": {"name": "pro", "seats": 3}}
    async with dispatching(service, {"hooks": webhook}, {"webhook": ["hooks"]}):
        sent = await send_and_settle(
            client, {"type": "user.created", "to": {"webhookUrl": url}, "data": data}
        )
    assert sent["deliveries"][0]["status"] == "SENT", sent
    [received] = sim.state("webhook").received
    assert (received.address, received.payload["body"]) == ("crm", data)
