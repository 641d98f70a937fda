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
    PoisonError,
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


async def test_an_email_without_a_subject_is_poison_and_not_sent(
    sim: Simulator, provider: SendGridProvider
) -> None:
    for subject in (None, ""):
        with pytest.raises(PoisonError) as raised:
            await provider.send(make_message(content=Content(subject=subject, text="Hi")))
        assert raised.value.reason == "empty_subject"
    assert sim.state("sendgrid").counts["requests"] == 0


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
