"""The FCM HTTP v1 adapter against the simulated FCM and Google OAuth endpoint.

The simulator knows an Apple device's token by its prefix (``apple-``), and checks what FCM
would hand on to APNs for such a token by Apple's rules.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import secrets
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.messages import FakeClock, push
from tidings.priorities import Priority
from tidings.providers._retry_after import parse_retry_after
from tidings.providers.base import PermanentError, PoisonError, TransientError
from tidings.providers.fcm import FcmAccount, FcmProvider
from tidings.providers.fcm.adapter import DELIVERY_ID_KEY
from tidings.simulator.fcm import FcmSimulator
from tidings.simulator.server import Simulator, SimulatorConfig
from tidings.states import Effect


def device() -> str:
    return "fcm-" + secrets.token_urlsafe(40)


def apple_device() -> str:
    """An Apple device's FCM token, as the simulator knows one (push.fcm_apple_token_prefix)."""
    return "apple-" + secrets.token_urlsafe(40)


def account(fcm_sim: FcmSimulator, **overrides: Any) -> FcmAccount:
    return FcmAccount.model_validate(fcm_sim.account(**overrides))


@pytest.fixture
async def sim(tmp_path: Path) -> AsyncIterator[Simulator]:
    async with Simulator(SimulatorConfig(credentials_dir=tmp_path / "credentials")) as sim:
        yield sim


@pytest.fixture
def fcm_sim(sim: Simulator) -> FcmSimulator:
    provider = sim.http["fcm"]
    assert isinstance(provider, FcmSimulator)
    return provider


@pytest.fixture
def clock(fcm_sim: FcmSimulator) -> FakeClock:
    clock = FakeClock()
    fcm_sim.clock = clock
    return clock


@pytest.fixture
async def fcm(fcm_sim: FcmSimulator, clock: FakeClock) -> AsyncIterator[FcmProvider]:
    provider = FcmProvider("fcm-main", account(fcm_sim), clock=clock)
    yield provider
    await provider.close()


async def test_sends_the_documented_message(
    fcm: FcmProvider, fcm_sim: FcmSimulator, clock: FakeClock
) -> None:
    token = device()
    message = push(
        token,
        data={"order": 42, "kind": "parcel", "extra": {"a": 1}},
        priority=Priority.HIGH,
        ttl=600,
        collapse="order-42",
    )
    result = await fcm.send(message)

    assert result.provider == "fcm-main"
    assert result.provider_msg_id is not None
    assert result.provider_msg_id.startswith("projects/tidings-sim/messages/0:")
    [received] = fcm_sim.state.received
    assert received.address == token
    assert received.idempotency_key == str(message.delivery_id)
    assert received.payload == {
        "token": token,
        "notification": {"title": "Your order", "body": "has shipped"},
        "data": {
            "order": "42",
            "kind": "parcel",
            "extra": '{"a":1}',
            DELIVERY_ID_KEY: str(message.delivery_id),
        },
        "android": {"priority": "HIGH", "ttl": "600s", "collapse_key": "order-42"},
        "apns": {
            "headers": {
                "apns-priority": "10",
                "apns-push-type": "alert",
                "apns-expiration": str(int(clock.now) + 600),
                "apns-collapse-id": "order-42",
            }
        },
    }


BACKGROUND_APNS = {
    "headers": {"apns-priority": "5", "apns-push-type": "background"},
    "payload": {"aps": {"content-available": 1}},
}


async def test_normal_priority_and_data_only_message(
    fcm: FcmProvider, fcm_sim: FcmSimulator
) -> None:
    await fcm.send(push(device(), subject=None, text="", data={"sync": "1"}))

    payload = fcm_sim.state.received[0].payload
    assert "notification" not in payload
    assert payload["android"] == {"priority": "NORMAL"}
    assert payload["apns"] == BACKGROUND_APNS


async def test_high_data_only_push_to_an_apple_device_goes_with_apns_priority_5(
    fcm: FcmProvider, fcm_sim: FcmSimulator
) -> None:
    """FCM hands apns.headers to APNs, which refuses priority 10 for a push that shows
    nothing: a HIGH data-only message keeps HIGH on Android and is a background push
    (priority 5, content-available) for an Apple device."""
    token = apple_device()
    result = await fcm.send(
        push(token, subject=None, text="", data={"sync": "1"}, priority=Priority.HIGH)
    )

    assert result.provider_msg_id is not None
    [received] = fcm_sim.state.received
    assert received.payload["android"] == {"priority": "HIGH"}
    assert received.payload["apns"] == BACKGROUND_APNS


async def test_high_alert_to_an_apple_device_keeps_priority_10(
    fcm: FcmProvider, fcm_sim: FcmSimulator
) -> None:
    await fcm.send(push(apple_device(), priority=Priority.HIGH))

    apns = fcm_sim.state.received[0].payload["apns"]
    assert apns == {"headers": {"apns-priority": "10", "apns-push-type": "alert"}}


async def test_a_collapse_key_over_64_bytes_is_hashed_for_apns_only(
    fcm: FcmProvider, fcm_sim: FcmSimulator
) -> None:
    """APNs refuses an apns-collapse-id over 64 bytes; Android has no such limit. The
    adapter does not know the device's platform, so it keeps the key for Android and sends
    APNs a digest of it: the same key always gives the same id, so collapsing still works."""
    long_key = "é" * 33  # 33 characters (the API allows 64), 66 bytes
    tokens = [apple_device(), apple_device(), device()]
    for token in tokens:
        await fcm.send(push(token, collapse=long_key))

    received = fcm_sim.state.received
    assert [r.address for r in received] == tokens
    ids = {r.payload["apns"]["headers"]["apns-collapse-id"] for r in received}
    assert len(ids) == 1
    [collapse_id] = ids
    assert len(collapse_id.encode()) <= 64
    assert {r.payload["android"]["collapse_key"] for r in received} == {long_key}

    await fcm.send(push(apple_device(), collapse="é" * 32))  # 64 bytes: sent as it is
    assert received[-1].payload["apns"]["headers"]["apns-collapse-id"] == "é" * 32


async def test_one_access_token_serves_many_sends(fcm: FcmProvider, fcm_sim: FcmSimulator) -> None:
    results = await asyncio.gather(*(fcm.send(push(device())) for _ in range(20)))

    assert len({r.provider_msg_id for r in results}) == 20
    assert fcm_sim.state.counts["token_grants"] == 1


async def test_access_token_is_refreshed_before_it_expires(
    fcm: FcmProvider, fcm_sim: FcmSimulator, clock: FakeClock
) -> None:
    await fcm.send(push(device()))
    clock.now += 3000  # 50 minutes: still well inside the hour
    await fcm.send(push(device()))
    assert fcm_sim.state.counts["token_grants"] == 1

    clock.now += 310  # 5 minutes before the hour is up: refresh early
    await fcm.send(push(device()))
    assert fcm_sim.state.counts["token_grants"] == 2
    assert fcm_sim.state.counts["unauthenticated"] == 0


async def test_short_token_lifetime_from_the_simulator_config(tmp_path: Path) -> None:
    config = SimulatorConfig(credentials_dir=tmp_path)
    config.push.fcm_token_lifetime = 2
    async with Simulator(config) as sim:
        fcm_sim = sim.http["fcm"]
        assert isinstance(fcm_sim, FcmSimulator)
        provider = FcmProvider("fcm", account(fcm_sim))
        try:
            await provider.send(push(device()))
            await asyncio.sleep(1.1)  # past half the token's 2 s life
            await provider.send(push(device()))
        finally:
            await provider.close()
        assert fcm_sim.state.counts["token_grants"] == 2
        assert fcm_sim.state.counts["received"] == 2


async def test_refused_access_token_is_refreshed_and_the_send_retried_once(
    fcm: FcmProvider, fcm_sim: FcmSimulator
) -> None:
    await fcm.send(push(device()))
    fcm_sim.revoke_tokens()

    result = await fcm.send(push(device()))

    assert result.provider_msg_id is not None
    assert fcm_sim.state.counts["unauthenticated"] == 1
    assert fcm_sim.state.counts["token_grants"] == 2
    assert fcm_sim.state.counts["received"] == 2


async def test_wrong_service_account_key_is_a_configuration_error(
    fcm_sim: FcmSimulator, tmp_path: Path
) -> None:
    info = json.loads(fcm_sim.service_account_path.read_text())
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    info["private_key"] = other.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    provider = FcmProvider(
        "fcm",
        account(fcm_sim, service_account_file=None, service_account_json=json.dumps(info)),
    )
    try:
        with pytest.raises(TransientError) as caught:
            await provider.send(push(device()))
    finally:
        await provider.close()
    assert caught.value.reason == "oauth:invalid_grant"
    assert caught.value.retry_after is not None and caught.value.retry_after >= 300
    assert caught.value.effect is None
    assert fcm_sim.state.counts["token_grants"] == 0
    assert fcm_sim.state.counts["requests"] == 0


async def test_sender_id_mismatch_keeps_the_token(fcm: FcmProvider, fcm_sim: FcmSimulator) -> None:
    """The token belongs to another Firebase project: our project's configuration is what
    is wrong (or the app registered with the wrong one). The token is not dead."""
    token = device()
    fcm_sim.state.script(token, "SENDER_ID_MISMATCH")

    with pytest.raises(TransientError) as caught:
        await fcm.send(push(token))

    assert caught.value.effect is None
    assert caught.value.retry_after is not None and caught.value.retry_after >= 300
    assert "SenderId mismatch" in str(caught.value)


async def test_malformed_registration_token_is_deactivated(
    fcm: FcmProvider, fcm_sim: FcmSimulator
) -> None:
    with pytest.raises(PermanentError) as caught:
        await fcm.send(push("not a token!"))

    assert caught.value.effect is Effect.DEACTIVATE_DEVICE
    assert caught.value.reason == "INVALID_ARGUMENT"


@pytest.mark.parametrize(
    ("field", "effect"),
    [
        ("message.token", Effect.DEACTIVATE_DEVICE),
        # Its message names the registration token, but the violation is elsewhere.
        ("message.apns.headers", None),
        ("message.android.ttl", None),
    ],
)
async def test_invalid_argument_deactivates_only_for_a_violation_on_the_token(
    fcm: FcmProvider, fcm_sim: FcmSimulator, field: str, effect: Effect | None
) -> None:
    """Only FCM's field violation on message.token says the token is malformed; the words
    of the error message are not read."""
    token = device()
    fcm_sim.state.script(token, f"INVALID_ARGUMENT:{field}")

    with pytest.raises(PermanentError) as caught:
        await fcm.send(push(token))

    assert (caught.value.reason, caught.value.effect) == ("INVALID_ARGUMENT", effect)


async def test_reserved_data_key_is_poison_and_never_sent(
    fcm: FcmProvider, fcm_sim: FcmSimulator
) -> None:
    for key in ("from", "google.sent_time", "gcm.notification"):
        with pytest.raises(PoisonError):
            await fcm.send(push(device(), data={key: "x"}))
    assert fcm_sim.state.counts["requests"] == 0


async def test_payload_limit_is_4096_bytes(fcm: FcmProvider, fcm_sim: FcmSimulator) -> None:
    overhead = len('{"notification":{"title":"Your order","body":"has shipped"},"data":{"b":""')
    overhead += len(f',"{DELIVERY_ID_KEY}":"{uuid.uuid4()}"}}}}')
    fits = push(device(), data={"b": "x" * (4096 - overhead)})
    await fcm.send(fits)

    with pytest.raises(PoisonError) as caught:
        await fcm.send(push(device(), data={"b": "x" * (4097 - overhead)}))
    assert caught.value.reason == "payload_too_large"
    assert fcm_sim.state.counts["requests"] == 1


async def test_simulator_checks_bearer_token_and_message_shape(
    sim: Simulator, fcm: FcmProvider
) -> None:
    url = f"{sim.url}/v1/projects/tidings-sim/messages:send"
    token = await fcm.tokens.get()
    auth = {"authorization": f"Bearer {token}"}
    async with httpx.AsyncClient() as client:
        anonymous = await client.post(url, json={"message": {"token": device()}})
        both = {"message": {"token": device(), "topic": "news"}}
        two_targets = await client.post(url, json=both, headers=auth)
        number = {"message": {"token": device(), "data": {"n": 1}}}
        not_string = await client.post(url, json=number, headers=auth)
        big = {"message": {"token": device(), "data": {"b": "x" * 5000}}}
        too_big = await client.post(url, json=big, headers=auth)

    assert anonymous.status_code == 401
    assert "details" not in anonymous.json()["error"]
    for response in (two_targets, not_string, too_big):
        assert response.status_code == 400
        error = response.json()["error"]
        assert error["status"] == "INVALID_ARGUMENT"
        assert error["details"][0] == {
            "@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError",
            "errorCode": "INVALID_ARGUMENT",
        }


@pytest.mark.parametrize(
    ("apns", "reason"),
    [
        ({"headers": {"apns-priority": "10"}}, "BadPriority"),
        ({"headers": {"apns-priority": "7"}}, "BadPriority"),
        ({"headers": {"apns-priority": "5", "apns-push-type": "background"}}, "InvalidPushType"),
        ({"headers": {"apns-collapse-id": "c" * 65}}, "BadCollapseId"),
    ],
)
async def test_simulator_checks_the_apns_block_of_a_message_to_an_apple_device(
    sim: Simulator, fcm: FcmProvider, apns: dict[str, Any], reason: str
) -> None:
    """A data-only message (nothing to show): what APNs refuses, FCM refuses for an Apple
    device's token, with APNs' reason; for another device the apns block is not used."""
    url = f"{sim.url}/v1/projects/tidings-sim/messages:send"
    auth = {"authorization": f"Bearer {await fcm.tokens.get()}"}
    async with httpx.AsyncClient() as client:
        answers = [
            await client.post(
                url,
                json={"message": {"token": token, "data": {"a": "1"}, "apns": apns}},
                headers=auth,
            )
            for token in (apple_device(), device())
        ]

    apple, other = answers
    assert other.status_code == 200
    assert apple.status_code == 400
    error = apple.json()["error"]
    assert error["status"] == "INVALID_ARGUMENT"
    assert error["details"] == [
        {
            "@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError",
            "errorCode": "INVALID_ARGUMENT",
        },
        {
            "@type": "type.googleapis.com/google.rpc.BadRequest",
            "fieldViolations": [{"field": "message.apns.headers", "description": error["message"]}],
        },
        {
            "@type": "type.googleapis.com/google.firebase.fcm.v1.ApnsError",
            "statusCode": 400,
            "reason": reason,
        },
    ]


async def test_access_token_refused_twice_is_a_configuration_error(
    fcm: FcmProvider, fcm_sim: FcmSimulator
) -> None:
    fcm_sim.lifetime = 0  # every token the simulator issues is already expired

    with pytest.raises(TransientError) as caught:
        await fcm.send(push(device()))

    assert caught.value.reason == "401"
    assert caught.value.retry_after == 300
    assert fcm_sim.state.counts["token_grants"] == 2  # refreshed and retried once, no more
    assert fcm_sim.state.counts["unauthenticated"] == 2


def test_retry_after_takes_seconds_or_an_http_date() -> None:
    now = 1_700_000_000.0
    date = email.utils.formatdate(now + 120, usegmt=True)

    assert parse_retry_after("30", now) == 30
    assert parse_retry_after(date, now) == 120
    assert parse_retry_after("soon", now) is None
    assert parse_retry_after(None, now) is None
