"""The Vonage adapter against the simulated Messages API over loopback (both ways to
authenticate, every error class), and the status webhook route, end to end: the simulator
posts its signed webhooks to tidings listening on a real socket."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
import uvicorn
from cryptography.hazmat.primitives import serialization
from pydantic import ValidationError

from tests.helpers import eventually, post, put_type
from tests.messages import message
from tests.processes import free_port
from tidings.api.app import create_app
from tidings.assembly import assemble_dispatcher
from tidings.priorities import Channel, Priority
from tidings.providers.base import Content, Message, PermanentError, PoisonError, TransientError
from tidings.providers.vonage import VonageAccount, VonageProvider
from tidings.providers.vonage.auth import ApplicationJwt
from tidings.service import Service, providers_from_settings
from tidings.simulator.behaviour import Behaviour
from tidings.simulator.server import Simulator, SimulatorConfig
from tidings.simulator.vonage import VonageSimulator
from tidings.simulator.vonage.reports import sign
from tidings.states import Effect

TO = "+447700900123"


@pytest.fixture
async def sim(tmp_path: Path) -> AsyncIterator[Simulator]:
    async with Simulator(SimulatorConfig(credentials_dir=tmp_path)) as simulator:
        yield simulator


def vonage(sim: Simulator) -> VonageSimulator:
    found = sim.http["vonage"]
    assert isinstance(found, VonageSimulator)
    return found


def account(sim: Simulator, *, jwt_auth: bool = False, **overrides: Any) -> VonageAccount:
    fields = vonage(sim).account(jwt_auth=jwt_auth, timeout=5) | overrides
    return VonageAccount.model_validate(fields)


@contextlib.asynccontextmanager
async def adapter(sim: Simulator, **options: Any) -> AsyncIterator[VonageProvider]:
    provider = VonageProvider("vonage-main", account(sim, **options))
    try:
        yield provider
    finally:
        await provider.close()


def sms(to: str = TO, text: str = "Your code is 123456") -> Message:
    return message(Channel.SMS, to, Content(text=text), type="otp", priority=Priority.HIGH)


@pytest.mark.parametrize("jwt_auth", [False, True], ids=["basic", "application-jwt"])
async def test_sends_the_messages_api_body_and_returns_the_message_uuid(
    sim: Simulator, jwt_auth: bool
) -> None:
    sent = sms()
    async with adapter(sim, jwt_auth=jwt_auth) as provider:
        result = await provider.send(sent)
    assert result.provider == "vonage-main"
    assert result.provider_msg_id is not None and len(result.provider_msg_id) == 36
    [received] = sim.state("vonage").received
    assert received.payload == {
        "message_type": "text",
        "channel": "sms",
        "to": "447700900123",
        "from": "447700900001",
        "text": "Your code is 123456",
        "client_ref": str(sent.delivery_id),
    }
    assert received.idempotency_key == str(sent.delivery_id)
    assert sim.state("vonage").counts["jwt_requests"] == (1 if jwt_auth else 0)


def test_the_application_jwt_has_vonages_claims(sim: Simulator) -> None:
    auth = account(sim, jwt_auth=True).request_auth()
    assert isinstance(auth, ApplicationJwt)
    public = serialization.load_pem_private_key(
        vonage(sim).key_path.read_bytes(), password=None
    ).public_key()
    token = auth.token()
    claims = jwt.decode(token, public, algorithms=["RS256"])  # type: ignore[arg-type]
    assert set(claims) == {"application_id", "iat", "jti", "exp"}
    assert claims["application_id"] == sim.config.vonage_application_id
    assert 0 < claims["exp"] - claims["iat"] <= 3600
    assert jwt.get_unverified_header(token)["alg"] == "RS256"
    assert auth.token() == token  # reused, not minted per request


async def test_a_jwt_signed_by_another_key_is_refused(sim: Simulator, tmp_path: Path) -> None:
    from cryptography.hazmat.primitives.asymmetric import rsa

    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = other.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    async with adapter(sim, jwt_auth=True, private_key_file=None, private_key=pem) as provider:
        with pytest.raises(TransientError) as caught:
            await provider.send(sms())
    assert (caught.value.reason, caught.value.retry_after) == ("auth_failed", 300)


async def test_a_malformed_number_is_permanent_and_suppressed_before_any_request(
    sim: Simulator,
) -> None:
    """Vonage's scripted invalid_number answer is in the contract suite's table."""
    async with adapter(sim) as provider:
        with pytest.raises(PermanentError) as caught:
            await provider.send(sms(to="+1234"))  # five digits: Vonage wants 7 to 15
    assert caught.value.effect is Effect.SUPPRESS_ADDRESS
    assert caught.value.reason == "invalid_number"
    assert sim.state("vonage").received == []


@pytest.mark.parametrize("text", ["", "x" * 1001])
async def test_text_vonage_cannot_send_is_poison_before_any_request(
    sim: Simulator, text: str
) -> None:
    async with adapter(sim) as provider:
        with pytest.raises(PoisonError):
            await provider.send(sms(text=text))
    assert sim.state("vonage").counts["requests"] == 0


def test_an_account_authenticates_exactly_one_way_and_hides_its_secrets(sim: Simulator) -> None:
    base = {"sender": "Tidings"}
    with pytest.raises(ValidationError, match="api_key and api_secret"):
        VonageAccount.model_validate(base)
    with pytest.raises(ValidationError, match="together"):
        VonageAccount.model_validate(base | {"api_key": "a1b2c3d4"})
    both = {"api_key": "k", "api_secret": "s", "application_id": "app", "private_key": "p"}
    with pytest.raises(ValidationError, match="not both"):
        VonageAccount.model_validate(base | both)
    with pytest.raises(ValidationError, match="application_id"):
        VonageAccount.model_validate(base | {"private_key": "pem"})
    with pytest.raises(ValidationError, match="unreadable"):
        VonageAccount.model_validate(base | {"application_id": "app", "private_key": "pem"})
    valid = VonageAccount.model_validate(base | {"api_key": "k", "api_secret": "s3cret-secret"})
    assert valid.on_ambiguous == "fail"
    assert "s3cret-secret" not in repr(valid) and "s3cret-secret" not in str(valid.model_dump())
    with pytest.raises(ValidationError):
        VonageAccount.model_validate({"sender": "+44 7700", "api_key": "k", "api_secret": "s"})


# --- the status webhook route -------------------------------------------------------------


@contextlib.asynccontextmanager
async def listening(service: Service, port: int) -> AsyncIterator[None]:
    """tidings' API on a real socket, where the simulator posts its webhooks."""
    config = uvicorn.Config(create_app(service), host="127.0.0.1", port=port, log_level="error")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    try:
        await eventually(lambda: server.started, within=10)
        yield
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, timeout=10)


@contextlib.asynccontextmanager
async def dispatching(service: Service, accounts: dict[str, Any]) -> AsyncIterator[None]:
    update = {"accounts": accounts, "providers": {"sms": list(accounts)}}
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


@pytest.fixture
def tidings_port() -> int:
    return free_port()


@pytest.fixture
async def reporting_sim(tmp_path: Path, tidings_port: int) -> AsyncIterator[Simulator]:
    status_url = f"http://127.0.0.1:{tidings_port}/v1/webhooks/vonage/vonage-sim"
    # Reports come later than the send's outcome is written (an event about a delivery
    # still SENDING is recorded but moves no status), as Vonage's do.
    behaviours = {"vonage": Behaviour(report_delay_ms=500)}
    config = SimulatorConfig(
        credentials_dir=tmp_path, vonage_status_url=status_url, behaviours=behaviours
    )
    async with Simulator(config) as simulator:
        yield simulator


async def _final(client: httpx.AsyncClient, notification_id: str) -> dict[str, Any] | None:
    shown = (await client.get(f"/v1/notifications/{notification_id}")).json()
    [found] = shown["deliveries"]
    return found if found["status"] in ("DELIVERED", "FAILED") else None


@pytest.mark.parametrize("reported", ["delivered", "undeliverable:1320", "rejected"])
async def test_status_webhooks_reach_the_delivery(
    service: Service,
    client: httpx.AsyncClient,
    reporting_sim: Simulator,
    tidings_port: int,
    reported: str,
) -> None:
    sim = reporting_sim
    if reported != "delivered":
        sim.state("vonage").behaviour.reports = {reported: 1.0}
    await put_type(client, "login.code", channels=("sms",))
    settings = account(sim, jwt_auth=True)
    async with listening(service, tidings_port), dispatching(service, {"vonage-sim": settings}):
        response = await post(client, {"type": "login.code", "to": {"phone": TO}})
        assert response.status_code == 202, response.text
        found = await eventually(lambda: _final(client, response.json()["id"]))
    kinds = [entry["kind"] for entry in found["history"]]
    assert sim.state("vonage").counts["reports_posted"] == 2  # submitted, then the outcome
    assert found["provider"] == "vonage-sim"
    if reported == "delivered":
        assert found["status"] == "DELIVERED" and "delivered" in kinds
        return
    assert (found["status"], found["failureKind"]) == ("FAILED", "permanent")
    [event] = [entry for entry in found["history"] if entry["kind"] == "undelivered"]
    status, _, code = reported.partition(":")
    assert event["detail"]["status"] == status
    if code:
        assert event["detail"]["error_code"] == code
        assert f"error {code}" in found["lastError"]


SECRET = "a-signature-secret-for-the-tests-0123456789"


@pytest.fixture
def signed_account(service: Service, sim: Simulator) -> None:
    accounts = {
        "vg": account(sim, signature_secret=SECRET),
    }
    service.settings = service.settings.model_copy(update={"accounts": accounts})


def _status_body() -> bytes:
    event = {
        "message_uuid": "aaaaaaaa-bbbb-4ccc-8ddd-0123456789ab",
        "to": "447700900123",
        "from": "447700900001",
        "timestamp": "2031-01-01T14:00:00.000Z",
        "status": "delivered",
        "channel": "sms",
    }
    return json.dumps(event).encode()


async def _post_status(
    client: httpx.AsyncClient, body: bytes, token: str | None, account: str = "vg"
) -> httpx.Response:
    headers = {"content-type": "application/json"}
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    return await client.post(f"/v1/webhooks/vonage/{account}", content=body, headers=headers)


@pytest.mark.usefixtures("signed_account")
async def test_a_signed_webhook_for_no_delivery_of_ours_is_accepted_and_unmatched(
    client: httpx.AsyncClient,
) -> None:
    body = _status_body()
    response = await _post_status(client, body, sign(SECRET, body, "k", "app", time.time()))
    assert response.status_code == 200, response.text
    assert response.json() == {
        "received": 1,
        "applied": 0,
        "duplicates": 0,
        "unmatched": 1,
        "ignored": 0,
    }


def _forged(body: bytes) -> dict[str, str | None]:
    now = time.time()
    claims = {"iat": int(now), "payload_hash": hashlib.sha256(body).hexdigest()}
    header = base64.urlsafe_b64encode(b'{"alg":"none","typ":"JWT"}').rstrip(b"=").decode()
    payload = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    return {
        "unsigned": None,
        "another secret": sign("not-the-secret-of-this-account-0123456789", body, "k", "a", now),
        "stale": sign(SECRET, body, "k", "app", now - 600),
        "from the future": sign(SECRET, body, "k", "app", now + 600),
        "another body": sign(SECRET, body + b" ", "k", "app", now),
        "alg none": f"{header}.{payload}.",
        "garbage": "not.a.jwt",
    }


@pytest.mark.usefixtures("signed_account")
@pytest.mark.parametrize("forgery", list(_forged(b"")))
async def test_unsigned_forged_or_stale_webhooks_are_refused(
    client: httpx.AsyncClient, forgery: str
) -> None:
    body = _status_body()
    response = await _post_status(client, body, _forged(body)[forgery])
    assert response.status_code == 401, response.text
    assert response.json()["error"]["code"] == "invalid_signature"


@pytest.mark.usefixtures("signed_account")
async def test_a_signed_body_not_json_is_refused(client: httpx.AsyncClient) -> None:
    """Unknown accounts and accounts without a secret: tests/integration/contract/."""
    junk = b"[1, 2]"
    refused = await _post_status(client, junk, sign(SECRET, junk, "k", "app", time.time()))
    assert refused.status_code == 400
