"""The APNs adapter against the simulated APNs (HTTP/2 cleartext and over TLS, token auth)."""

from __future__ import annotations

import asyncio
import json
import secrets
import ssl
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import h2.config
import h2.connection
import h2.events
import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization

from tests.helpers import eventually
from tests.messages import FakeClock, push
from tidings.priorities import Priority
from tidings.providers.apns import ApnsAccount, ApnsProvider
from tidings.providers.base import PermanentError, PoisonError, TransientError
from tidings.simulator.apns import ApnsSimulator
from tidings.simulator.server import Simulator, SimulatorConfig
from tidings.states import Effect

MINUTE = 60.0


def device() -> str:
    return secrets.token_hex(32)


def account(apns_sim: ApnsSimulator, **options: Any) -> ApnsAccount:
    return ApnsAccount.model_validate(apns_sim.account(**options))


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
    provider = ApnsProvider("apns-main", account(apns_sim), clock=clock)
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
        "environment": "production",
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


async def test_unregistered_carries_apples_timestamp(
    apns: ApnsProvider, apns_sim: ApnsSimulator, clock: FakeClock
) -> None:
    """410's timestamp (milliseconds) is the last time APNs confirmed the token invalid: the
    deactivation carries it, so that a token registered again after it stays active."""
    token = device()
    since = clock.now - 3600.0
    apns_sim.unregister(token, at=since)

    for _ in range(2):  # unregistered is unregistered: every later push is refused too
        with pytest.raises(PermanentError) as caught:
            await apns.send(push(token))
        assert (caught.value.reason, caught.value.effect) == (
            "Unregistered",
            Effect.DEACTIVATE_DEVICE,
        )
        assert caught.value.effect_at == datetime.fromtimestamp(int(since * 1000) / 1000, UTC)

    apns_sim.state.script(token, "ExpiredToken")  # a scripted 410: confirmed just now
    with pytest.raises(PermanentError) as scripted:
        await apns.send(push(token))
    assert scripted.value.effect_at == datetime.fromtimestamp(int(clock.now * 1000) / 1000, UTC)


async def test_a_410_without_a_usable_timestamp_deactivates_unconditionally(
    sim: Simulator, apns: ApnsProvider, apns_sim: ApnsSimulator
) -> None:
    """Only a 410 carries the time; any other dead-token answer has none."""
    token = device()
    apns_sim.state.script(token, "BadDeviceToken")

    with pytest.raises(PermanentError) as caught:
        await apns.send(push(token))

    assert caught.value.effect is Effect.DEACTIVATE_DEVICE
    assert caught.value.effect_at is None


async def test_malformed_device_token_is_deactivated(apns: ApnsProvider) -> None:
    with pytest.raises(PermanentError) as caught:
        await apns.send(push("not-hex-at-all"))

    assert (caught.value.effect, caught.value.reason) == (
        Effect.DEACTIVATE_DEVICE,
        "BadDeviceToken",
    )


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


# Apple's environments: a token belongs to production or to the sandbox.


async def test_a_token_belongs_to_one_environment(
    apns_sim: ApnsSimulator, clock: FakeClock
) -> None:
    development = device()
    apns_sim.sandbox_tokens.add(development)
    production = ApnsProvider("apns", account(apns_sim), clock=clock)
    sandbox = ApnsProvider("apns-dev", account(apns_sim, sandbox=True, tls=True), clock=clock)
    try:
        with pytest.raises(PermanentError) as to_production:
            await production.send(push(development))
        with pytest.raises(PermanentError) as to_sandbox:
            await sandbox.send(push(device()))
        await sandbox.send(push(development))
        await production.send(push(device()))
    finally:
        await production.close()
        await sandbox.close()

    for wrong in (to_production.value, to_sandbox.value):
        assert (wrong.reason, wrong.effect) == ("BadDeviceToken", Effect.DEACTIVATE_DEVICE)
    received = apns_sim.state.received
    assert [r.payload["environment"] for r in received] == ["sandbox", "production"]


# Over TLS, as Apple serves it: ALPN h2, and GOAWAY when a server goes away.


@pytest.fixture
async def apns_tls(apns_sim: ApnsSimulator, clock: FakeClock) -> AsyncIterator[ApnsProvider]:
    provider = ApnsProvider("apns-tls", account(apns_sim, tls=True), clock=clock)
    yield provider
    await provider.close()


async def test_sends_over_tls_with_alpn_h2_trusting_the_ca_file(
    apns_tls: ApnsProvider, apns_sim: ApnsSimulator
) -> None:
    assert apns_tls.account.base_url.startswith("https://")
    await apns_tls.send(push(device()))
    await apns_tls.send(push(device()))

    assert apns_sim.state.counts["received"] == 2
    assert apns_sim.state.counts["tls_connections"] == 1  # one connection, two streams
    assert {r.payload["http_version"] for r in apns_sim.state.received} == {"2"}


async def test_tls_without_h2_is_refused(apns_sim: ApnsSimulator) -> None:
    assert apns_sim.cert_file is not None
    context = ssl.create_default_context(cafile=str(apns_sim.cert_file))
    async with httpx.AsyncClient(verify=context) as client:  # offers only http/1.1
        with pytest.raises(httpx.TransportError):
            await client.post(f"{apns_sim.tls.url}/3/device/{device()}", json={"aps": {}})
    assert apns_sim.state.counts["refused_without_h2"] == 1
    assert apns_sim.state.counts["requests"] == 0


async def test_after_goaway_the_adapter_sends_on_a_new_connection(
    apns_tls: ApnsProvider, apns_sim: ApnsSimulator
) -> None:
    await apns_tls.send(push(device()))
    assert await apns_sim.go_away("Shutdown") == 1

    for _ in range(3):
        await apns_tls.send(push(device()))

    assert apns_sim.state.counts["tls_connections"] == 2
    assert apns_sim.state.counts["received"] == 4


async def test_a_push_in_flight_at_goaway_is_a_transient_failure(
    apns_tls: ApnsProvider, apns_sim: ApnsSimulator
) -> None:
    """The simulator answers the requests it had before its GOAWAY (HTTP/2's graceful close,
    as Apple's servers may); httpcore 1.0 gives up on them at the GOAWAY, so such a push is
    a transient failure, retried (it may have been delivered: at least once). Nothing is
    lost, and the next push goes out on a new connection."""
    await apns_tls.send(push(device()))  # the connection is open
    apns_sim.state.behaviour.latency_ms = 300
    in_flight = asyncio.create_task(apns_tls.send(push(device())))
    await eventually(lambda: apns_sim.state.counts["requests"] == 2, within=5)
    await apns_sim.go_away("Shutdown")
    apns_sim.state.behaviour.latency_ms = 0

    with pytest.raises(TransientError) as caught:
        await in_flight
    assert caught.value.ambiguous and caught.value.reason == "no_answer"  # it was sent
    await apns_tls.send(push(device()))
    assert apns_sim.state.counts["tls_connections"] == 2
    assert apns_sim.state.counts["received"] == 3  # the simulator did accept the second


class RawH2:
    """A bare HTTP/2 client over TLS, to see the frames the simulator sends."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.h2 = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        self.h2.initiate_connection()
        self.writer.write(self.h2.data_to_send())

    @classmethod
    async def connect(cls, apns_sim: ApnsSimulator) -> RawH2:
        context = ssl.create_default_context(cafile=str(apns_sim.cert_file))
        context.set_alpn_protocols(["h2"])
        reader, writer = await asyncio.open_connection(
            apns_sim.tls.host, apns_sim.tls.port, ssl=context
        )
        return cls(reader, writer)

    async def goaway(self) -> h2.events.ConnectionTerminated:
        """Read until the server's GOAWAY."""
        while data := await asyncio.wait_for(self.reader.read(65536), 5):
            for event in self.h2.receive_data(data):
                if isinstance(event, h2.events.ConnectionTerminated):
                    return event
        raise AssertionError("the connection closed without a GOAWAY")


async def test_goaway_carries_apples_json_reason(apns_sim: ApnsSimulator) -> None:
    client = await RawH2.connect(apns_sim)
    await asyncio.sleep(0.05)  # the server has the connection
    closing = asyncio.create_task(apns_sim.go_away("Shutdown"))

    goaway = await client.goaway()
    await closing

    assert goaway.error_code == 0
    assert json.loads(goaway.additional_data or b"") == {"reason": "Shutdown"}
    client.writer.close()


async def test_a_stopping_simulator_says_goaway_shutdown(tmp_path: Path) -> None:
    sim = Simulator(SimulatorConfig(credentials_dir=tmp_path))
    await sim.start()
    apns_sim = sim.http["apns"]
    assert isinstance(apns_sim, ApnsSimulator)
    assert sim.servers["apns"].port == apns_sim.tls.port != 0
    client = await RawH2.connect(apns_sim)
    await asyncio.sleep(0.05)
    stopping = asyncio.create_task(sim.stop())

    goaway = await client.goaway()
    await stopping

    assert json.loads(goaway.additional_data or b"") == {"reason": "Shutdown"}
    client.writer.close()
