"""Outbound webhooks: Standard Webhooks signatures, the SSRF guard, and the adapter against
the simulated receiver over loopback."""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import time
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import standardwebhooks
from typer.testing import CliRunner

from tests.messages import message
from tidings.cli.app import app
from tidings.priorities import Channel, Priority
from tidings.providers.base import Content, Message, PermanentError, TransientError
from tidings.providers.ssrf import is_public
from tidings.providers.webhook import WebhookAccount, WebhookProvider
from tidings.providers.webhook import signing as standard_webhooks
from tidings.providers.webhook.adapter import classify
from tidings.providers.webhook.signing import WebhookVerificationError, sign, verify
from tidings.simulator import tidings_config
from tidings.simulator.behaviour import Received
from tidings.simulator.server import Simulator, SimulatorConfig

# Until the lead adds a webhook channel, any channel does: the adapter ignores it.

# The example of the Standard Webhooks reference libraries (libraries/python/tests).
SPEC_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
SPEC_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
SPEC_TS = 1614265330
SPEC_BODY = b'{"test": 2432232314}'
SPEC_SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def spec_headers(signature: str = SPEC_SIGNATURE) -> dict[str, str]:
    return {
        "webhook-id": SPEC_ID,
        "webhook-timestamp": str(SPEC_TS),
        "webhook-signature": signature,
    }


# Signatures.


def test_spec_example_signature() -> None:
    assert sign(SPEC_SECRET, SPEC_ID, SPEC_TS, SPEC_BODY) == SPEC_SIGNATURE
    verify(SPEC_SECRET, SPEC_BODY, spec_headers(), now=SPEC_TS)
    verify(SPEC_SECRET.removeprefix("whsec_"), SPEC_BODY, spec_headers(), now=SPEC_TS)


def test_spec_example_tampered_signature_fails() -> None:
    bad = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OA="
    with pytest.raises(WebhookVerificationError):
        verify(SPEC_SECRET, SPEC_BODY, spec_headers(bad), now=SPEC_TS)
    with pytest.raises(WebhookVerificationError):
        verify(SPEC_SECRET, SPEC_BODY + b" ", spec_headers(), now=SPEC_TS)
    with pytest.raises(WebhookVerificationError):
        verify(SPEC_SECRET, SPEC_BODY, spec_headers() | {"webhook-id": "msg_2"}, now=SPEC_TS)


def test_one_matching_entry_among_several_is_enough() -> None:
    header = " ".join(
        [
            "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=",
            "v2,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=",
            SPEC_SIGNATURE,
            "garbage",
        ]
    )
    verify(SPEC_SECRET, SPEC_BODY, spec_headers(header), now=SPEC_TS)
    with pytest.raises(WebhookVerificationError):
        verify(
            SPEC_SECRET, SPEC_BODY, spec_headers(SPEC_SIGNATURE.replace("v1", "v2")), now=SPEC_TS
        )


@pytest.mark.parametrize(
    ("offset", "valid"), [(-299, True), (299, True), (-301, False), (301, False)]
)
def test_timestamp_window_is_five_minutes(offset: int, valid: bool) -> None:
    now = SPEC_TS + offset
    if valid:
        verify(SPEC_SECRET, SPEC_BODY, spec_headers(), now=now)
    else:
        with pytest.raises(WebhookVerificationError, match="tolerance"):
            verify(SPEC_SECRET, SPEC_BODY, spec_headers(), now=now)


def test_rotation_a_receiver_with_old_and_new_secret_accepts_either() -> None:
    old, new = "whsec_b2xkLXNlY3JldC1vbGQ=", "whsec_bmV3LXNlY3JldC1uZXc="
    body = b'{"order": 7}'
    signed_new = standard_webhooks.headers(new, "msg_1", body)
    verify([old, new], body, signed_new)
    with pytest.raises(WebhookVerificationError):
        verify(old, body, signed_new)


@pytest.mark.parametrize("missing", ["webhook-id", "webhook-timestamp", "webhook-signature"])
def test_missing_headers_fail(missing: str) -> None:
    headers = spec_headers()
    del headers[missing]
    with pytest.raises(WebhookVerificationError):
        verify(SPEC_SECRET, SPEC_BODY, headers, now=SPEC_TS)


def test_round_trip_with_current_time_and_header_case() -> None:
    headers = standard_webhooks.headers(SPEC_SECRET, "msg_x", b"{}")
    assert abs(int(headers["webhook-timestamp"]) - time.time()) < 5
    verify(SPEC_SECRET, b"{}", {k.upper(): v for k, v in headers.items()})


def test_secret_must_be_base64() -> None:
    with pytest.raises(ValueError):
        WebhookAccount(secret="whsec_not base64!")  # type: ignore[arg-type]


# The SSRF guard.


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.1.2.3",
        "172.16.0.1",
        "192.168.1.1",
        "169.254.169.254",
        "100.64.0.1",
        "0.0.0.0",
        "224.0.0.1",
        "240.0.0.1",
        "255.255.255.255",
        "::1",
        "::",
        "fe80::1",
        "fc00::1",
        "ff02::1",
        "::ffff:127.0.0.1",
        "::ffff:10.0.0.1",
        "2002:7f00:1::",
        "64:ff9b::a9fe:a9fe",
    ],
)
def test_non_public_addresses(address: str) -> None:
    assert not is_public(ipaddress.ip_address(address))


@pytest.mark.parametrize("address", ["93.184.216.34", "8.8.8.8", "2606:4700:4700::1111"])
def test_public_addresses(address: str) -> None:
    assert is_public(ipaddress.ip_address(address))


# The adapter against the simulated receiver.


@pytest.fixture
async def sim(tmp_path: Path) -> AsyncIterator[Simulator]:
    async with Simulator(SimulatorConfig(credentials_dir=tmp_path)) as simulator:
        yield simulator


def account(sim: Simulator, **overrides: Any) -> WebhookAccount:
    fields: dict[str, Any] = {
        "secret": sim.config.webhook_secret,
        "allow_private": True,  # the simulator listens on loopback
        "allow_insecure": True,  # over plain http
    }
    return WebhookAccount.model_validate(fields | overrides)


@pytest.fixture
async def provider(sim: Simulator) -> AsyncIterator[WebhookProvider]:
    webhooks = WebhookProvider("hooks", account(sim))
    yield webhooks
    await webhooks.close()


def hook(address: str, data: dict[str, Any] | None = None, **fields: Any) -> Message:
    body = data if data is not None else {"order": 42, "state": "shipped"}
    return message(Channel.WEBHOOK, address, Content(data=body), type="order.shipped", **fields)


def receiver(sim: Simulator, name: str = "orders") -> str:
    return f"{sim.url}/webhook-receiver/{name}"


async def test_delivers_a_signed_body_the_receiver_verifies(
    sim: Simulator, provider: WebhookProvider
) -> None:
    message = hook(receiver(sim))
    result = await provider.send(message)
    assert result.provider == "hooks"
    assert result.provider_msg_id == str(message.delivery_id)
    [received] = sim.state("webhook").received
    assert received.address == "orders"
    assert received.idempotency_key == str(message.delivery_id)
    assert received.payload["body"] == {"order": 42, "state": "shipped"}


async def test_notification_data_is_the_body_when_content_has_none(
    sim: Simulator, provider: WebhookProvider
) -> None:
    message = Message(
        delivery_id=uuid.uuid4(),
        notification_id=uuid.uuid4(),
        channel=Channel.WEBHOOK,
        address=receiver(sim),
        type="user.created",
        priority=Priority.NORMAL,
        data={"user": "u1"},
    )
    await provider.send(message)
    assert sim.state("webhook").received[0].payload["body"] == {"user": "u1"}


async def test_a_hostname_reaches_the_receiver_when_private_targets_are_allowed(
    sim: Simulator, provider: WebhookProvider
) -> None:
    # localhost may resolve to ::1 first, where nothing listens: the next address is tried.
    await provider.send(hook(f"http://localhost:{sim.http_port}/webhook-receiver/byname"))
    [received] = sim.state("webhook").received
    assert received.address == "byname"
    # The request went to a checked address but still names the host it was meant for.
    assert received.payload["host"] == f"localhost:{sim.http_port}"


@pytest.mark.parametrize(
    "target",
    [
        "http://127.0.0.1:{port}/webhook-receiver/orders",
        "http://localhost:{port}/webhook-receiver/orders",
        "http://[::1]:{port}/webhook-receiver/orders",
        "http://[::ffff:127.0.0.1]:{port}/webhook-receiver/orders",
        "http://10.0.0.7/hook",
        "http://169.254.169.254/latest/meta-data/",
        "https://192.168.0.10/hook",
        "http://0.0.0.0:{port}/webhook-receiver/orders",
    ],
)
async def test_private_targets_are_refused_before_any_request(sim: Simulator, target: str) -> None:
    guarded = WebhookProvider("guarded", account(sim, allow_private=False))
    try:
        with pytest.raises(PermanentError) as caught:
            await guarded.send(hook(target.format(port=sim.http_port)))
    finally:
        await guarded.close()
    assert caught.value.reason == "private_target"
    assert caught.value.effect is None
    assert sim.state("webhook").counts["requests"] == 0


@pytest.mark.parametrize(
    ("status", "reason"), [(301, "redirect"), (307, "redirect"), (405, "http_405")]
)
def test_redirects_are_not_followed_and_other_4xx_are_permanent(status: int, reason: str) -> None:
    error = classify(status, httpx.Headers())
    assert isinstance(error, PermanentError)
    assert error.reason == reason
    assert error.effect is None  # only 410 suppresses the URL


@pytest.mark.parametrize("status", [400, 401, 403, 404])
def test_retried_client_errors_honour_a_retry_after(status: int) -> None:
    error = classify(status, httpx.Headers({"retry-after": "30"}))
    assert isinstance(error, TransientError)
    assert error.retry_after == 30.0


def test_request_timeout_is_transient() -> None:
    assert isinstance(classify(408, httpx.Headers({"retry-after": "3"})), TransientError)


@pytest.mark.parametrize(
    "target",
    [
        "ftp://example.com/hook",
        "file:///etc/passwd",
        "example.com/hook",
        "http:///x",
        "https://example.com:70000/hook",
    ],
)
async def test_only_http_and_https_urls(provider: WebhookProvider, target: str) -> None:
    with pytest.raises(PermanentError) as caught:
        await provider.send(hook(target))
    assert caught.value.reason == "invalid_target"


# Plain http only where the account allows it.


async def test_plain_http_is_refused_without_allow_insecure(sim: Simulator) -> None:
    assert WebhookAccount(secret=sim.config.webhook_secret).allow_insecure is False
    strict = WebhookProvider("strict", account(sim, allow_insecure=False))
    try:
        with pytest.raises(PermanentError) as caught:
            await strict.send(hook(receiver(sim)))
    finally:
        await strict.close()
    assert caught.value.reason == "insecure_target"
    assert "allow_insecure" in str(caught.value)
    assert caught.value.effect is None  # the URL is not suppressed: the account may change
    assert sim.state("webhook").counts["requests"] == 0


async def test_the_simulators_written_account_reaches_its_receiver(sim: Simulator) -> None:
    """``simulate --write-config`` gives an account that may use plain http on loopback."""
    written = WebhookAccount.model_validate(tidings_config.accounts(sim)["webhook-sim"])
    assert written.allow_insecure and written.allow_private
    provider = WebhookProvider("webhook-sim", written)
    try:
        await provider.send(hook(receiver(sim, "written")))
    finally:
        await provider.close()
    assert [r.address for r in sim.state("webhook").received] == ["written"]


# One secret per endpoint, derived from the account's.


def write_config(tmp_path: Path, sim: Simulator) -> Path:
    config = tmp_path / "tidings.toml"
    config.write_text(
        "[accounts.hooks]\n"
        'kind = "webhook"\n'
        f'secret = "{sim.config.webhook_secret}"\n'
        "[accounts.mail]\n"
        'kind = "sendgrid"\n'
        'api_key = "SG.x"\n'
        'from_email = "a@example.com"\n'
    )
    return config


def secret_command(config: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["webhook-secret", "--config", str(config), *args])
    return result.exit_code, result.stdout if result.exit_code == 0 else result.output


def endpoint_secret_of(config: Path, url: str) -> str:
    """What a receiver's operator runs to learn its secret."""
    code, output = secret_command(config, "--account", "hooks", url)
    assert code == 0, output
    return output.strip()


def reference_verify(secret: str, received: Received) -> None:
    """Check a received request with the Standard Webhooks reference library."""
    assert received.idempotency_key is not None
    standardwebhooks.Webhook(secret).verify(
        received.payload["raw"],
        {
            "webhook-id": received.idempotency_key,
            "webhook-timestamp": received.payload["timestamp"],
            "webhook-signature": received.payload["signature"],
        },
    )


async def test_each_endpoint_verifies_with_its_own_secret(
    sim: Simulator, provider: WebhookProvider, tmp_path: Path
) -> None:
    config = write_config(tmp_path, sim)
    url_a, url_b = receiver(sim, "shop-a"), receiver(sim, "shop-b")
    await provider.send(hook(url_a))
    await provider.send(hook(url_b))  # the simulator checked each with its endpoint's secret
    a, b = sim.state("webhook").received
    secret_a, secret_b = endpoint_secret_of(config, url_a), endpoint_secret_of(config, url_b)
    assert len({secret_a, secret_b, sim.config.webhook_secret}) == 3
    reference_verify(secret_a, a)
    reference_verify(secret_b, b)
    with pytest.raises(standardwebhooks.WebhookVerificationError):
        reference_verify(secret_a, b)  # A's secret does not verify a delivery to B
    with pytest.raises(standardwebhooks.WebhookVerificationError):
        reference_verify(sim.config.webhook_secret, a)  # nor does the account's


@pytest.mark.parametrize(
    "target",
    [
        "HTTP://LocalHost:{port}/webhook-receiver/Mixed?b=2&a=1",
        "http://127.0.0.1:{port}/webhook-receiver/caf%C3%A9?q=a%20b",
        "http://127.0.0.1:{port}/webhook-receiver/café?",
    ],
)
async def test_sender_and_receiver_agree_on_the_canonical_url(
    sim: Simulator, provider: WebhookProvider, tmp_path: Path, target: str
) -> None:
    """The receiver rebuilds the URL from the request (Host header, request line); the
    secret the command prints for the URL as written verifies what arrived."""
    url = target.format(port=sim.http_port)
    await provider.send(hook(url))
    [received] = sim.state("webhook").received
    reference_verify(endpoint_secret_of(write_config(tmp_path, sim), url), received)


async def test_a_receiver_cannot_forge_a_delivery_to_another(
    sim: Simulator, tmp_path: Path
) -> None:
    """Receiver A knows only its own secret: what it signs, B refuses (401)."""
    url_a, url_b = receiver(sim, "shop-a"), receiver(sim, "shop-b")
    signer = standardwebhooks.Webhook(endpoint_secret_of(write_config(tmp_path, sim), url_a))
    body = '{"order":1,"state":"refunded"}'
    now = datetime.now(UTC)
    headers = {
        "webhook-id": "msg_forged",
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": signer.sign("msg_forged", now, body),
        "content-type": "application/json",
    }
    async with httpx.AsyncClient() as client:
        forged = await client.post(url_b, content=body, headers=headers)
        genuine = await client.post(url_a, content=body, headers=headers)
    assert forged.status_code == 401, forged.text
    assert genuine.status_code == 200, genuine.text
    assert [r.address for r in sim.state("webhook").received] == ["shop-a"]


def test_endpoint_secret_derivation_and_canonical_url(sim: Simulator, tmp_path: Path) -> None:
    """whsec_ + base64(HMAC-SHA256(account key, canonical URL)); scheme and host compare
    case-insensitively and a default port is dropped; path and query are as given."""
    config = write_config(tmp_path, sim)
    key = base64.b64decode(sim.config.webhook_secret.removeprefix("whsec_"))
    canonical = "https://hooks.example.com/in/Orders?v=2"
    digest = hmac.new(key, canonical.encode(), hashlib.sha256).digest()
    expected = "whsec_" + base64.b64encode(digest).decode()
    for same in (canonical, "HTTPS://Hooks.Example.COM:443/in/Orders?v=2"):
        assert endpoint_secret_of(config, same) == expected
    for other in (
        "https://hooks.example.com/in/orders?v=2",
        "https://hooks.example.com/in/Orders?v=3",
        "https://hooks.example.com:8443/in/Orders?v=2",
        "http://hooks.example.com/in/Orders?v=2",
    ):
        assert endpoint_secret_of(config, other) != expected, other
    assert endpoint_secret_of(config, "http://h.example.com:80") == endpoint_secret_of(
        config, "http://h.example.com/"
    )


@pytest.mark.parametrize(
    ("args", "shown"),
    [
        (["--account", "nope", "https://h.example.com/x"], "no account named 'nope'"),
        (["--account", "mail", "https://h.example.com/x"], "not a webhook account"),
        (["--account", "hooks", "ftp://h.example.com/x"], "http(s)://host"),
        (["--account", "hooks", "https://h.example.com:99999/x"], "port outside"),
    ],
)
def test_webhook_secret_command_names_what_is_wrong(
    sim: Simulator, tmp_path: Path, args: list[str], shown: str
) -> None:
    code, output = secret_command(write_config(tmp_path, sim), *args)
    assert code == 1
    assert shown in output, output
    assert sim.config.webhook_secret not in output
