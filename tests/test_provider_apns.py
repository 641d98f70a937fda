"""The APNs adapter against the simulated APNs (HTTP/2 cleartext, token auth)."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from tests.messages import FakeClock, push
from tidings.priorities import Priority
from tidings.providers.apns import ApnsProvider
from tidings.providers.base import PermanentError, PoisonError, ProviderError, TransientError
from tidings.simulator.apns import ApnsSimulator
from tidings.simulator.server import Simulator, SimulatorConfig
from tidings.states import Effect

MINUTE = 60.0


def device() -> str:
    return secrets.token_hex(32)


@pytest.fixture
async def sim(tmp_path: Path) -> AsyncIterator[Simulator]:
    async with Simulator(SimulatorConfig(credentials_dir=tmp_path / "credentials")) as sim:
        yield sim


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def apns_sim(sim: Simulator, clock: FakeClock) -> ApnsSimulator:
    provider = sim.http["apns"]
    assert isinstance(provider, ApnsSimulator)
    provider.clock = clock
    return provider


@pytest.fixture
async def apns(apns_sim: ApnsSimulator, clock: FakeClock) -> AsyncIterator[ApnsProvider]:
    provider = ApnsProvider("apns-main", apns_sim.account(), clock=clock)
    yield provider
    await provider.close()


async def test_sends_alert_with_documented_headers_over_http2(
    apns: ApnsProvider, apns_sim: ApnsSimulator, clock: FakeClock
) -> None:
    token = device()
    message = push(token, data={"order": 42}, priority=Priority.HIGH, ttl=600, collapse="order-42")
    result = await apns.send(message)

    assert result.provider == "apns-main"
    assert result.provider_msg_id == str(message.delivery_id)
    [received] = apns_sim.state.received
    assert received.address == token
    assert received.idempotency_key == str(message.delivery_id)
    assert received.payload == {
        "headers": {
            "apns-topic": "com.example.tidings",
            "apns-push-type": "alert",
            "apns-priority": "10",
            "apns-id": str(message.delivery_id),
            "apns-expiration": str(int(clock.now) + 600),
            "apns-collapse-id": "order-42",
        },
        "body": {"aps": {"alert": {"title": "Your order", "body": "has shipped"}}, "order": 42},
        "http_version": "2",
    }


async def test_background_push_uses_priority_5(apns: ApnsProvider, apns_sim: ApnsSimulator) -> None:
    await apns.send(push(device(), subject=None, text="", data={"sync": 1}, priority=Priority.HIGH))

    payload = apns_sim.state.received[0].payload
    assert payload["headers"]["apns-push-type"] == "background"
    assert payload["headers"]["apns-priority"] == "5"
    assert "apns-expiration" not in payload["headers"]
    assert payload["body"] == {"aps": {"content-available": 1}, "sync": 1}


async def test_ttl_zero_means_one_attempt(apns: ApnsProvider, apns_sim: ApnsSimulator) -> None:
    await apns.send(push(device(), ttl=0))

    assert apns_sim.state.received[0].payload["headers"]["apns-expiration"] == "0"


async def test_http1_is_refused_and_the_adapter_uses_http2(
    sim: Simulator, apns: ApnsProvider, apns_sim: ApnsSimulator
) -> None:
    async with httpx.AsyncClient() as client:
        http1 = await client.post(f"{sim.url}/3/device/{device()}", json={"aps": {}})
    await apns.send(push(device()))
    await apns.send(push(device()))

    assert http1.http_version == "HTTP/1.1"
    assert http1.status_code == 505
    assert apns_sim.http_versions == {"1.1": 1, "2": 2}
    assert apns_sim.state.counts["received"] == 2


async def test_same_apns_id_is_a_duplicate(apns: ApnsProvider, apns_sim: ApnsSimulator) -> None:
    message = push(device())
    first = await apns.send(message)
    second = await apns.send(message)

    assert first.provider_msg_id == second.provider_msg_id == str(message.delivery_id)
    summary = apns_sim.state.summary()
    assert (summary["distinct"], summary["duplicates"]) == (1, 1)


@pytest.mark.parametrize(
    ("reason", "error", "effect"),
    [
        ("BadDeviceToken", PermanentError, Effect.DEACTIVATE_DEVICE),
        ("DeviceTokenNotForTopic", PermanentError, Effect.DEACTIVATE_DEVICE),
        ("Unregistered", PermanentError, Effect.DEACTIVATE_DEVICE),
        ("ExpiredToken", PermanentError, Effect.DEACTIVATE_DEVICE),
        ("BadCollapseId", PermanentError, None),
        ("BadTopic", PermanentError, None),
        ("TopicDisallowed", PermanentError, None),
        ("DuplicateHeaders", PermanentError, None),
        ("BadPath", PermanentError, None),
        ("PayloadTooLarge", PoisonError, None),
        ("IdleTimeout", TransientError, None),
        ("TooManyRequests", TransientError, None),
        ("InternalServerError", TransientError, None),
        ("ServiceUnavailable", TransientError, None),
        ("Shutdown", TransientError, None),
        ("InvalidProviderToken", TransientError, None),
        ("MissingProviderToken", TransientError, None),
        ("BadCertificateEnvironment", TransientError, None),
        ("Forbidden", TransientError, None),
        ("TooManyProviderTokenUpdates", TransientError, None),
    ],
)
async def test_reasons_are_classified(
    apns: ApnsProvider,
    apns_sim: ApnsSimulator,
    reason: str,
    error: type[ProviderError],
    effect: Effect | None,
) -> None:
    token = device()
    apns_sim.state.script(token, reason)

    with pytest.raises(error) as caught:
        await apns.send(push(token))

    assert type(caught.value) is error
    assert caught.value.effect is effect
    assert caught.value.reason == reason
    assert apns_sim.state.counts["received"] == 0


@pytest.mark.parametrize(
    "reason", ["InvalidProviderToken", "Forbidden", "BadCertificate", "UnrelatedKeyIdInToken"]
)
async def test_credential_errors_keep_the_token_and_retry_late(
    apns: ApnsProvider, apns_sim: ApnsSimulator, reason: str
) -> None:
    token = device()
    apns_sim.state.script(token, reason)

    with pytest.raises(TransientError) as caught:
        await apns.send(push(token))

    assert caught.value.effect is None
    assert caught.value.retry_after is not None and caught.value.retry_after >= 300


async def test_unregistered_carries_apples_timestamp(
    apns: ApnsProvider, apns_sim: ApnsSimulator
) -> None:
    token = device()
    apns_sim.state.script(token, "Unregistered")

    with pytest.raises(PermanentError) as caught:
        await apns.send(push(token))

    assert caught.value.effect is Effect.DEACTIVATE_DEVICE
    assert " since 1" in str(caught.value)


async def test_malformed_device_token_is_deactivated(apns: ApnsProvider) -> None:
    with pytest.raises(PermanentError) as caught:
        await apns.send(push("not-hex-at-all"))

    assert (caught.value.effect, caught.value.reason) == (
        Effect.DEACTIVATE_DEVICE,
        "BadDeviceToken",
    )


async def test_outage_and_rate_limit_are_transient(
    apns: ApnsProvider, apns_sim: ApnsSimulator
) -> None:
    apns_sim.state.behaviour.down = True
    with pytest.raises(TransientError) as outage:
        await apns.send(push(device()))
    assert outage.value.reason == "ServiceUnavailable"

    apns_sim.state.behaviour.down = False
    apns_sim.state.behaviour.rate_limit = 1
    await apns.send(push(device()))
    with pytest.raises(TransientError) as limited:
        await apns.send(push(device()))
    assert limited.value.reason == "TooManyRequests"


async def test_wrong_signing_key_is_a_credential_error(
    apns_sim: ApnsSimulator, clock: FakeClock
) -> None:
    other = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    account = apns_sim.account(private_key_file=None, private_key=other.decode())
    provider = ApnsProvider("apns", account, clock=clock)
    try:
        with pytest.raises(TransientError) as caught:
            await provider.send(push(device()))
    finally:
        await provider.close()
    assert caught.value.reason == "InvalidProviderToken"
    assert caught.value.effect is None


# The provider token's age rule: reuse under 50 minutes, never refresh within 20.


async def test_provider_token_is_reused_then_refreshed_after_50_minutes(
    apns: ApnsProvider, apns_sim: ApnsSimulator, clock: FakeClock
) -> None:
    start = int(clock.now)
    await apns.send(push(device()))
    clock.now += 19 * MINUTE
    await apns.send(push(device()))
    clock.now += 30 * MINUTE  # 49 minutes
    await apns.send(push(device()))
    assert list(apns_sim.jwts.values()) == [start]

    clock.now += 2 * MINUTE  # 51 minutes
    await apns.send(push(device()))
    assert list(apns_sim.jwts.values()) == [start, start + 51 * 60]
    assert apns_sim.state.counts["received"] == 4


async def test_expired_provider_token_answer_refreshes_at_most_every_20_minutes(
    apns: ApnsProvider, apns_sim: ApnsSimulator, clock: FakeClock
) -> None:
    token = device()
    await apns.send(push(token))
    clock.now += 5 * MINUTE
    apns_sim.state.script(token, "ExpiredProviderToken")

    with pytest.raises(TransientError) as young:
        await apns.send(push(token))
    assert young.value.reason == "ExpiredProviderToken"
    assert young.value.retry_after == pytest.approx(15 * MINUTE)
    assert len(apns_sim.jwts) == 1  # not refreshed: the token is 5 minutes old

    clock.now += 20 * MINUTE  # 25 minutes old: refresh and retry once
    apns_sim.state.script(token, "ExpiredProviderToken")
    result = await apns.send(push(token))
    assert result.provider_msg_id is not None
    assert len(apns_sim.jwts) == 2

    apns_sim.state.script(token, "ExpiredProviderToken")
    with pytest.raises(TransientError):
        await apns.send(push(token))
    assert len(apns_sim.jwts) == 2  # the new token is brand new: no third one


async def test_simulator_refuses_tokens_older_than_an_hour(
    sim: Simulator, apns_sim: ApnsSimulator, clock: FakeClock
) -> None:
    key = serialization.load_pem_private_key(apns_sim.key_path.read_bytes(), password=None)
    old = jwt.encode(
        {"iss": apns_sim.team_id, "iat": int(clock.now - 61 * MINUTE)},
        key,  # type: ignore[arg-type]
        algorithm="ES256",
        headers={"kid": apns_sim.key_id},
    )
    async with httpx.AsyncClient(http1=False, http2=True) as client:
        response = await client.post(
            f"{sim.url}/3/device/{device()}",
            json={"aps": {"alert": "hi"}},
            headers={"authorization": f"bearer {old}", "apns-topic": apns_sim.topic},
        )

    assert response.status_code == 403
    assert response.json() == {"reason": "ExpiredProviderToken"}


async def test_simulator_refuses_token_updates_within_20_minutes_on_one_connection(
    sim: Simulator, apns_sim: ApnsSimulator, clock: FakeClock
) -> None:
    key = serialization.load_pem_private_key(apns_sim.key_path.read_bytes(), password=None)

    def token(iat: float) -> str:
        return jwt.encode(
            {"iss": apns_sim.team_id, "iat": int(iat)},
            key,  # type: ignore[arg-type]
            algorithm="ES256",
            headers={"kid": apns_sim.key_id},
        )

    async with httpx.AsyncClient(http1=False, http2=True) as client:

        async def send(jwt_: str) -> httpx.Response:
            return await client.post(
                f"{sim.url}/3/device/{device()}",
                json={"aps": {"alert": "hi"}},
                headers={"authorization": f"bearer {jwt_}", "apns-topic": apns_sim.topic},
            )

        first = await send(token(clock.now - 10 * MINUTE))
        too_soon = await send(token(clock.now))
        clock.now += 15 * MINUTE
        later = await send(token(clock.now))

    assert first.status_code == 200
    assert too_soon.status_code == 429
    assert too_soon.json() == {"reason": "TooManyProviderTokenUpdates"}
    assert later.status_code == 200


async def test_payload_limit_is_4096_bytes(apns: ApnsProvider, apns_sim: ApnsSimulator) -> None:
    overhead = len('{"aps":{"alert":{"title":"Your order","body":"has shipped"}},"b":""}')
    await apns.send(push(device(), data={"b": "x" * (4096 - overhead)}))

    with pytest.raises(PoisonError) as caught:
        await apns.send(push(device(), data={"b": "x" * (4097 - overhead)}))
    assert caught.value.reason == "PayloadTooLarge"
    assert apns_sim.state.counts["requests"] == 1


async def test_collapse_id_over_64_bytes_is_poison(
    apns: ApnsProvider, apns_sim: ApnsSimulator
) -> None:
    await apns.send(push(device(), collapse="c" * 64))
    with pytest.raises(PoisonError) as caught:
        await apns.send(push(device(), collapse="é" * 33))  # 66 bytes
    assert caught.value.reason == "BadCollapseId"
    assert apns_sim.state.counts["requests"] == 1


async def test_simulator_checks_headers_with_apples_reasons(
    sim: Simulator, apns: ApnsProvider, apns_sim: ApnsSimulator
) -> None:
    bearer = {"authorization": f"bearer {apns.token.current()}", "apns-topic": apns_sim.topic}
    cases = [
        ({"apns-topic": ""}, {"aps": {"alert": "x"}}, "MissingTopic"),
        ({"apns-topic": "com.other.app"}, {"aps": {"alert": "x"}}, "TopicDisallowed"),
        ({"apns-push-type": "sms"}, {"aps": {"alert": "x"}}, "InvalidPushType"),
        ({"apns-priority": "7"}, {"aps": {"alert": "x"}}, "BadPriority"),
        (
            {"apns-push-type": "background", "apns-priority": "10"},
            {"aps": {"content-available": 1}},
            "BadPriority",
        ),
        ({"apns-expiration": "soon"}, {"aps": {"alert": "x"}}, "BadExpirationDate"),
        ({"apns-collapse-id": "c" * 65}, {"aps": {"alert": "x"}}, "BadCollapseId"),
        ({"apns-id": "not-a-uuid"}, {"aps": {"alert": "x"}}, "BadMessageId"),
        ({}, {"aps": {"alert": "x" * 5000}}, "PayloadTooLarge"),
    ]
    async with httpx.AsyncClient(http1=False, http2=True) as client:
        for headers, body, reason in cases:
            response = await client.post(
                f"{sim.url}/3/device/{device()}", json=body, headers=bearer | headers
            )
            assert response.json() == {"reason": reason}, headers
            assert response.status_code == (413 if reason == "PayloadTooLarge" else 400)
    assert apns_sim.state.counts["received"] == 0


async def test_transport_failure_is_transient(apns_sim: ApnsSimulator) -> None:
    provider = ApnsProvider("apns", apns_sim.account(base_url="http://127.0.0.1:9"))
    try:
        with pytest.raises(TransientError) as caught:
            await provider.send(push(device()))
    finally:
        await provider.close()
    assert caught.value.reason == "transport"
