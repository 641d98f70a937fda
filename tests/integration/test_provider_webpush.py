"""The Web Push adapter against the simulated push service over loopback: the encrypted
payload decrypts (on the simulator's own RFC 8291 code) to what tidings meant, the VAPID JWT
is valid, the headers follow RFC 8030, every error class; subscriptions as device tokens at
the API; and a revoked subscription deactivating its device through the real dispatcher."""

from __future__ import annotations

import ast
import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric import ec

import tidings.simulator
from tests.helpers import eventually, post, put_type
from tests.messages import push
from tidings.assembly import assemble_dispatcher
from tidings.priorities import Priority
from tidings.providers.base import PermanentError, PoisonError, TransientError
from tidings.providers.webpush import WebPushAccount, WebPushProvider
from tidings.providers.webpush.adapter import topic
from tidings.service import Service, providers_from_settings
from tidings.simulator.server import Simulator, SimulatorConfig
from tidings.simulator.webpush import WebPushSimulator
from tidings.simulator.webpush.crypto import b64url, raw_public
from tidings.states import Effect


@pytest.fixture
async def sim(tmp_path: Path) -> AsyncIterator[Simulator]:
    async with Simulator(SimulatorConfig(credentials_dir=tmp_path)) as simulator:
        yield simulator


def service_of(sim: Simulator) -> WebPushSimulator:
    found = sim.http["webpush"]
    assert isinstance(found, WebPushSimulator)
    return found


def account(sim: Simulator, **overrides: Any) -> WebPushAccount:
    return WebPushAccount.model_validate(service_of(sim).account(timeout=5) | overrides)


@contextlib.asynccontextmanager
async def adapter(sim: Simulator, **overrides: Any) -> AsyncIterator[WebPushProvider]:
    provider = WebPushProvider("webpush-main", account(sim, **overrides))
    try:
        yield provider
    finally:
        await provider.close()


def subscription(sim: Simulator, **options: Any) -> str:
    return json.dumps(service_of(sim).subscribe(**options))


async def test_the_payload_decrypts_to_the_message_with_rfc_8030_headers(sim: Simulator) -> None:
    token = subscription(sim)
    sent = push(token, data={"order": "42"}, priority=Priority.HIGH, ttl=600, collapse="order-42")
    async with adapter(sim) as provider:
        result = await provider.send(sent)
    assert result.provider == "webpush-main" and result.provider_msg_id
    [received] = sim.state("webpush").received
    assert received.payload["json"] == {
        "title": "Your order",
        "body": "has shipped",
        "data": {"order": "42"},
        "delivery_id": str(sent.delivery_id),
    }
    assert received.idempotency_key == str(sent.delivery_id)
    assert received.payload["headers"] == {"ttl": 600, "urgency": "high", "topic": "order-42"}


async def test_the_vapid_jwt_names_the_push_service_and_expires_within_a_day(
    sim: Simulator,
) -> None:
    async with adapter(sim) as provider:
        await provider.send(push(subscription(sim)))
    [received] = sim.state("webpush").received
    claims = received.payload["vapid"]
    assert claims["aud"] == sim.url  # the endpoint's origin
    assert claims["sub"] == sim.config.webpush_vapid_subject
    assert time.time() < claims["exp"] <= time.time() + 24 * 3600


@pytest.mark.parametrize(
    ("priority", "ttl", "urgency", "sent_ttl"),
    [
        (Priority.NORMAL, None, "normal", 2_419_200),
        (Priority.LOW, 0, "normal", 0),
        (Priority.HIGH, 10**9, "high", 2_419_200),
    ],
)
async def test_urgency_and_ttl(
    sim: Simulator, priority: Priority, ttl: int | None, urgency: str, sent_ttl: int
) -> None:
    async with adapter(sim) as provider:
        await provider.send(push(subscription(sim), priority=priority, ttl=ttl))
    headers = sim.state("webpush").received[0].payload["headers"]
    assert (headers["urgency"], headers["ttl"], headers["topic"]) == (urgency, sent_ttl, None)


def test_a_collapse_key_that_is_no_topic_becomes_a_stable_32_character_digest() -> None:
    assert topic("order-42_b") == "order-42_b"
    for key in ("order.shipped:42", "x" * 33, "çà"):
        made = topic(key)
        assert len(made) == 32 and made == topic(key)
        assert all(c.isalnum() or c in "-_" for c in made)
    assert topic("a.b") != topic("a:b")


@pytest.mark.parametrize(("gone", "reason"), [(True, "subscription_gone"), (False, "x")])
async def test_an_expired_or_unknown_subscription_deactivates_the_device(
    sim: Simulator, gone: bool, reason: str
) -> None:
    token = subscription(sim)
    endpoint = json.loads(token)["endpoint"]
    if gone:
        service_of(sim).unsubscribe(endpoint)
    else:
        reason = "subscription_not_found"
        token = token.replace(endpoint, endpoint[:-4] + "0000")
    async with adapter(sim) as provider:
        with pytest.raises(PermanentError) as caught:
            await provider.send(push(token))
    assert (caught.value.effect, caught.value.reason) == (Effect.DEACTIVATE_DEVICE, reason)


async def test_a_payload_over_4096_bytes_encrypted_is_poison_before_sending(
    sim: Simulator,
) -> None:
    async with adapter(sim) as provider:
        with pytest.raises(PoisonError) as caught:
            await provider.send(push(subscription(sim), text="x" * 3950))
    assert caught.value.reason == "payload_too_large"
    assert sim.state("webpush").counts["requests"] == 0


async def test_another_application_servers_key_is_a_configuration_error(sim: Simulator) -> None:
    """A subscription made for another VAPID key: 403, retried late, the device kept."""
    other = b64url(raw_public(ec.generate_private_key(ec.SECP256R1())))
    async with adapter(sim) as provider:
        with pytest.raises(TransientError) as caught:
            await provider.send(push(subscription(sim, server_key=other)))
    assert (caught.value.reason, caught.value.retry_after, caught.value.effect) == (
        "vapid_forbidden",
        300.0,
        None,
    )


async def test_a_token_that_is_no_subscription_fails_without_deactivating(
    sim: Simulator,
) -> None:
    async with adapter(sim) as provider:
        with pytest.raises(PermanentError) as caught:
            await provider.send(push("fcm-web-registration-token"))
    assert (caught.value.reason, caught.value.effect) == ("invalid_subscription", None)


def test_an_account_needs_one_readable_vapid_key_and_a_contact(sim: Simulator) -> None:
    good = service_of(sim).account()
    with pytest.raises(ValueError, match="exactly one"):
        WebPushAccount.model_validate(good | {"vapid_private_key": "abc"})
    with pytest.raises(ValueError, match="VAPID"):
        WebPushAccount.model_validate(
            good | {"vapid_private_key_file": None, "vapid_private_key": "not a key"}
        )
    with pytest.raises(ValueError, match="cannot read"):
        WebPushAccount.model_validate(good | {"vapid_private_key_file": "/nonexistent/key.pem"})
    with pytest.raises(ValueError, match="vapid_subject"):
        WebPushAccount.model_validate(good | {"vapid_subject": "ops@example.com"})


def test_simulator_modules_import_nothing_from_tidings_adapters() -> None:
    """The simulator is a second reading of each provider's documentation: it may not share
    (and so copy) the adapters' or the webhook verifiers' code."""
    package = Path(tidings.simulator.__file__).parent
    for path in package.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                assert not name.startswith(("tidings.providers", "tidings.tracking")), path


# --- devices at the API -------------------------------------------------------------------


async def test_a_web_subscription_registers_in_canonical_form(
    client: httpx.AsyncClient, sim: Simulator
) -> None:
    made = service_of(sim).subscribe()
    body = {"userId": "ana", "platform": "web", "token": json.dumps(made, indent=2)}
    first = await client.post("/v1/devices", json=body)
    assert first.status_code == 201, first.text
    stored = first.json()["token"]
    assert json.loads(stored) == {"endpoint": made["endpoint"], "keys": made["keys"]}
    assert " " not in stored
    again = await client.post("/v1/devices", json=body | {"token": json.dumps(made)})
    assert again.json()["token"] == stored
    assert len((await client.get("/v1/users/ana/devices")).json()) == 1
    assert (await client.get(f"/v1/devices/{quote(stored, safe='')}")).status_code == 200
    opaque = {"userId": "ana", "platform": "web", "token": "fcm-token-abc"}
    assert (await client.post("/v1/devices", json=opaque)).json()["token"] == "fcm-token-abc"


def _broken(made: dict[str, Any]) -> dict[str, Any]:
    keys = made["keys"]
    return {
        "not json": "{endpoint",
        "no keys": {"endpoint": made["endpoint"]},
        "endpoint not a URL": {**made, "endpoint": "push-service"},
        # Two hosts, depending on the URL parser (docs/security.md, Outbound requests).
        "endpoint with a backslash": {**made, "endpoint": "https://127.0.0.1:1\\@push.example/x"},
        "p256dh not a key": {**made, "keys": {**keys, "p256dh": b64url(b"\x04" + b"\x01" * 64)}},
        "auth too short": {**made, "keys": {**keys, "auth": b64url(b"short")}},
        "unknown field": {**made, "extra": 1},
    }


@pytest.mark.parametrize("case", list(_broken({"endpoint": "", "keys": {}})))
async def test_a_malformed_subscription_is_refused_naming_the_token(
    client: httpx.AsyncClient, sim: Simulator, case: str
) -> None:
    broken = _broken(service_of(sim).subscribe())[case]
    token = broken if isinstance(broken, str) else json.dumps(broken)
    response = await client.post(
        "/v1/devices", json={"userId": "ana", "platform": "web", "token": token}
    )
    assert response.status_code == 422, response.text
    assert response.json()["error"]["field"] == "token"


# --- through the dispatcher ---------------------------------------------------------------


@contextlib.asynccontextmanager
async def dispatching(service: Service, account: WebPushAccount) -> AsyncIterator[None]:
    chains = {"push": ["sink"], "push_web": ["webpush-sim"]}
    update = {"accounts": {"webpush-sim": account}, "providers": chains}
    service.settings = service.settings.model_copy(update=update)
    providers = providers_from_settings(service.settings)
    stop = asyncio.Event()
    task = asyncio.create_task(assemble_dispatcher(service, providers).run(stop))
    try:
        yield
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=30)
        await providers.close()


async def _settled(client: httpx.AsyncClient, notification_id: str) -> dict[str, Any] | None:
    [found] = (await client.get(f"/v1/notifications/{notification_id}")).json()["deliveries"]
    return None if found["status"] in ("PENDING", "SENDING") else found


async def _inactive(client: httpx.AsyncClient, token: str) -> dict[str, Any] | None:
    shown: dict[str, Any] = (await client.get(f"/v1/devices/{quote(token, safe='')}")).json()
    return None if shown["active"] else shown


async def test_a_revoked_subscription_deactivates_the_device_end_to_end(
    service: Service, client: httpx.AsyncClient, sim: Simulator
) -> None:
    await put_type(client, "order.shipped", channels=("push",))
    made = service_of(sim).subscribe()
    device = {"userId": "ana", "platform": "web", "token": json.dumps(made)}
    token = (await client.post("/v1/devices", json=device)).json()["token"]
    async with dispatching(service, account(sim)):
        first = await post(client, {"type": "order.shipped", "userId": "ana", "data": {"n": 1}})
        sent = await eventually(lambda: _settled(client, first.json()["id"]))
        assert (sent["status"], sent["provider"]) == ("SENT", "webpush-sim")
        [received] = sim.state("webpush").received
        assert received.payload["json"]["delivery_id"] == sent["id"]
        assert received.payload["json"]["title"] == "Hello"

        service_of(sim).unsubscribe(made["endpoint"])
        second = await post(client, {"type": "order.shipped", "userId": "ana"})
        failed = await eventually(lambda: _settled(client, second.json()["id"]))
        assert (failed["status"], failed["failureKind"]) == ("FAILED", "permanent")
        gone = await eventually(lambda: _inactive(client, token), within=5)
        assert gone["deactivatedReason"] == "subscription_gone"
        third = await post(client, {"type": "order.shipped", "userId": "ana"})
        assert third.status_code == 422 and third.json()["error"]["code"] == "no_address"


async def test_the_control_api_subscribes_and_revokes(sim: Simulator) -> None:
    async with httpx.AsyncClient(base_url=sim.url) as control:
        made = await control.post("/_sim/webpush/subscriptions")
        assert made.status_code == 201
        subscription = made.json()
        browser = subscription["endpoint"].rpartition("/")[2]
        assert (await control.delete(f"/_sim/webpush/subscriptions/{browser}")).status_code == 204
    async with adapter(sim) as provider:
        with pytest.raises(PermanentError) as caught:
            await provider.send(push(json.dumps(subscription)))
    assert caught.value.reason == "subscription_gone"
