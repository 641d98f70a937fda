"""The SendGrid adapter against the simulated v3 Mail Send endpoint, over loopback HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from tests.messages import message
from tidings.priorities import Channel
from tidings.providers.base import (
    Content,
    Message,
    PermanentError,
    PoisonError,
    TransientError,
)
from tidings.providers.sendgrid import SendGridAccount, SendGridProvider
from tidings.providers.sendgrid.errors import retry_after_seconds
from tidings.simulator.server import Simulator, SimulatorConfig

KEY = "SG.test-key"
NOW = 1_700_000_000.0
UNSUBSCRIBE = "<https://tidings.example.com/u/OPAQUE>, <mailto:u+OPAQUE@tidings.example.com>"


def make_message(address: str = "ada@example.com", **changes: Any) -> Message:
    content = Content(subject="Your order", text="Thanks.", html="<p>Thanks.</p>")
    return message(Channel.EMAIL, address, changes.pop("content", content), **changes)


@pytest.fixture
async def sim(tmp_path: Path) -> AsyncIterator[Simulator]:
    config = SimulatorConfig(credentials_dir=tmp_path, sendgrid_api_key=KEY)
    async with Simulator(config) as simulator:
        yield simulator


def account(sim: Simulator, **changes: Any) -> SendGridAccount:
    fields: dict[str, Any] = {
        "api_key": SecretStr(KEY),
        "base_url": sim.url,
        "from_email": "noreply@tidings.example.com",
        "from_name": "Tidings",
        "timeout": 5,
    }
    return SendGridAccount(**(fields | changes))


@pytest.fixture
async def provider(sim: Simulator) -> AsyncIterator[SendGridProvider]:
    adapter = SendGridProvider("sendgrid-main", account(sim), clock=lambda: NOW)
    yield adapter
    await adapter.close()


async def test_sends_the_documented_body(sim: Simulator, provider: SendGridProvider) -> None:
    headers = {
        "List-Unsubscribe": UNSUBSCRIBE,
        "List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
    }
    message = make_message(type="newsletter", category="marketing", headers=headers)

    result = await provider.send(message)

    [received] = sim.state("sendgrid").received
    assert result.provider == "sendgrid-main"
    assert result.provider_msg_id == sim.state("sendgrid").answers[str(message.delivery_id)]
    assert received.idempotency_key == str(message.delivery_id)
    assert received.payload == {
        "personalizations": [
            {
                "to": [{"email": "ada@example.com"}],
                "custom_args": {"delivery_id": str(message.delivery_id)},
            }
        ],
        "from": {"email": "noreply@tidings.example.com", "name": "Tidings"},
        "subject": "Your order",
        "content": [
            {"type": "text/plain", "value": "Thanks."},
            {"type": "text/html", "value": "<p>Thanks.</p>"},
        ],
        "headers": headers,
        "categories": ["newsletter"],
    }


async def test_text_only_and_no_headers(sim: Simulator, provider: SendGridProvider) -> None:
    await provider.send(make_message(content=Content(subject="Hi", text="Plain")))

    [received] = sim.state("sendgrid").received
    assert received.payload["content"] == [{"type": "text/plain", "value": "Plain"}]
    assert "headers" not in received.payload


async def test_a_repeated_delivery_is_a_second_email(
    sim: Simulator, provider: SendGridProvider
) -> None:
    """SendGrid has no idempotency key: sending one delivery twice sends two emails. What
    keeps tidings from doing so is its claim and dedup key, not the provider."""
    message = make_message()
    first = await provider.send(message)
    second = await provider.send(message)

    assert first.provider_msg_id != second.provider_msg_id
    summary = sim.state("sendgrid").summary()
    assert (summary["received"], summary["distinct"], summary["duplicates"]) == (2, 1, 1)


async def test_an_email_without_a_subject_is_poison_and_not_sent(
    sim: Simulator, provider: SendGridProvider
) -> None:
    for subject in (None, ""):
        with pytest.raises(PoisonError) as raised:
            await provider.send(make_message(content=Content(subject=subject, text="Hi")))
        assert raised.value.reason == "empty_subject"
    assert sim.state("sendgrid").counts["requests"] == 0


async def test_a_server_error_does_not_wait_for_the_rate_limit_reset(
    sim: Simulator, provider: SendGridProvider
) -> None:
    """Every SendGrid answer carries X-RateLimit-Reset (the simulator's is a real epoch
    second, our clock is fixed long before it): a 5xx must not read it as a Retry-After,
    or retries during an outage would follow the rate window instead of the backoff."""
    sim.state("sendgrid").script("ada@example.com", "500")

    with pytest.raises(TransientError) as raised:
        await provider.send(make_message())

    assert raised.value.reason == "http_500"
    assert raised.value.retry_after is None  # the retry policy's backoff decides


async def test_wrong_key_is_a_long_transient_error(sim: Simulator) -> None:
    adapter = SendGridProvider("sendgrid", account(sim, api_key=SecretStr("SG.wrong")))
    try:
        with pytest.raises(TransientError) as raised:
            await adapter.send(make_message())
    finally:
        await adapter.close()

    assert raised.value.reason == "credentials" and raised.value.effect is None
    assert raised.value.retry_after is not None and raised.value.retry_after >= 60
    assert "authorization grant is invalid" in str(raised.value)
    assert sim.state("sendgrid").received == []


@pytest.mark.parametrize(
    ("error", "kind", "reason"),
    [
        ("400", PermanentError, "bad_request"),
        ("401", TransientError, "credentials"),
        ("403", TransientError, "credentials"),
        ("413", PoisonError, "payload_too_large"),
        ("500", TransientError, "http_500"),
        ("502", TransientError, "http_502"),
        ("404", PermanentError, "http_404"),
    ],
)
async def test_classifies_each_error(
    sim: Simulator,
    provider: SendGridProvider,
    error: str,
    kind: type[Exception],
    reason: str,
) -> None:
    sim.state("sendgrid").script("ada@example.com", error)

    with pytest.raises(kind) as raised:
        await provider.send(make_message())

    assert type(raised.value) is kind
    assert raised.value.reason == reason  # type: ignore[attr-defined]
    assert raised.value.effect is None  # type: ignore[attr-defined]
    assert sim.state("sendgrid").received == []


async def test_rate_limited_retries_after_the_reset(
    sim: Simulator, provider: SendGridProvider
) -> None:
    state = sim.state("sendgrid")
    state.behaviour = state.behaviour.model_copy(update={"rate_limit": 1.0})
    await provider.send(make_message())

    with pytest.raises(TransientError) as raised:
        await provider.send(make_message())

    assert raised.value.reason == "rate_limited"
    assert "too many requests" in str(raised.value)
    # Our clock is fixed at NOW; the simulator's reset is a real epoch second, so the wait
    # is reset - NOW: it must come from X-RateLimit-Reset.
    assert raised.value.retry_after is not None and raised.value.retry_after > 1000


async def test_outage_is_transient(sim: Simulator, provider: SendGridProvider) -> None:
    state = sim.state("sendgrid")
    state.behaviour = state.behaviour.model_copy(update={"down": True})

    with pytest.raises(TransientError) as raised:
        await provider.send(make_message())
    assert raised.value.reason == "http_503"


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"Retry-After": "7", "X-RateLimit-Reset": str(int(NOW) + 60)}, 7.0),
        ({"Retry-After": "Tue, 14 Nov 2023 22:13:27 GMT"}, 7.0),
        ({"X-RateLimit-Reset": str(int(NOW) + 3)}, 3.0),
        ({"X-RateLimit-Reset": str(int(NOW) - 3)}, 0.0),
        ({"Retry-After": "soon"}, None),
        ({}, None),
    ],
)
def test_retry_after_parsing(headers: dict[str, str], expected: float | None) -> None:
    """Retry-After (seconds or an HTTP date) wins over X-RateLimit-Reset (epoch seconds)."""
    assert retry_after_seconds(httpx.Headers(headers), NOW) == expected


async def test_connection_refused_is_transient(sim: Simulator) -> None:
    adapter = SendGridProvider("sendgrid", account(sim, base_url="http://127.0.0.1:9"))
    try:
        with pytest.raises(TransientError):
            await adapter.send(make_message())
    finally:
        await adapter.close()


async def test_the_simulator_validates_like_sendgrid(sim: Simulator) -> None:
    async with httpx.AsyncClient(base_url=sim.url) as client:
        missing = await client.post("/v3/mail/send", json={})
        anonymous = await client.post(
            "/v3/mail/send", json={}, headers={"Authorization": "Bearer nope"}
        )
        bad = await client.post(
            "/v3/mail/send",
            headers={"Authorization": f"Bearer {KEY}"},
            json={
                "personalizations": [{"to": [{"email": "not-an-address"}]}],
                "from": {"email": "noreply@tidings.example.com"},
                "subject": "x",
                "content": [{"type": "text/plain", "value": ""}],
            },
        )

    assert missing.status_code == 401 and anonymous.status_code == 401
    assert anonymous.json()["errors"][0]["message"].startswith("The provided authorization")
    assert bad.status_code == 400
    fields = [error["field"] for error in bad.json()["errors"]]
    assert fields == ["personalizations.0.to.0.email", "content.0.value"]
    assert all(set(error) == {"message", "field", "help"} for error in bad.json()["errors"])
    for response in (missing, anonymous, bad):
        assert {"x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset"} <= set(
            response.headers
        )
