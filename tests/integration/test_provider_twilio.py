"""The Twilio adapter against the simulated Twilio Messages API over loopback."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.messages import message
from tidings.priorities import Channel, Priority
from tidings.providers.base import Content, Message, PermanentError, PoisonError, TransientError
from tidings.providers.twilio import TwilioAccount, TwilioProvider
from tidings.providers.twilio.errors import classify
from tidings.simulator.server import Simulator, SimulatorConfig
from tidings.simulator.twilio.api import num_segments
from tidings.states import Effect

TO = "+15551230001"
CALLBACK = "https://tidings.example/v1/webhooks/twilio"


@pytest.fixture
async def sim(tmp_path: Path) -> AsyncIterator[Simulator]:
    async with Simulator(SimulatorConfig(credentials_dir=tmp_path)) as simulator:
        yield simulator


def account(sim: Simulator, **overrides: Any) -> TwilioAccount:
    fields: dict[str, Any] = {
        "account_sid": sim.config.twilio_account_sid,
        "auth_token": sim.config.twilio_auth_token,
        "from_number": "+15005550006",
        "base_url": sim.url,
        "status_callback_url": CALLBACK,
        "timeout": 5,
    }
    return TwilioAccount.model_validate(fields | overrides)


@pytest.fixture
async def provider(sim: Simulator) -> AsyncIterator[TwilioProvider]:
    twilio = TwilioProvider("twilio-main", account(sim))
    yield twilio
    await twilio.close()


def sms(to: str = TO, text: str = "Your code is 123456", **fields: Any) -> Message:
    return message(
        Channel.SMS, to, Content(text=text), type="otp", priority=Priority.HIGH, **fields
    )


async def test_sends_the_form_fields_and_returns_the_message_sid(
    sim: Simulator, provider: TwilioProvider
) -> None:
    message = sms(ttl_seconds=600)
    result = await provider.send(message)
    assert result.provider == "twilio-main"
    assert result.provider_msg_id is not None
    assert re.fullmatch(r"SM[0-9a-f]{32}", result.provider_msg_id)
    [received] = sim.state("twilio").received
    assert received.payload == {
        "To": TO,
        "From": "+15005550006",
        "Body": "Your code is 123456",
        "StatusCallback": f"{CALLBACK}?delivery={message.delivery_id}",
        "ValidityPeriod": "600",
    }
    assert received.idempotency_key == str(message.delivery_id)


@pytest.mark.parametrize(("ttl", "validity"), [(0, "1"), (86_400, "36000"), (None, None)])
async def test_validity_period_is_clamped_to_twilios_range(
    sim: Simulator, provider: TwilioProvider, ttl: int | None, validity: str | None
) -> None:
    await provider.send(sms(ttl_seconds=ttl))
    assert sim.state("twilio").received[0].payload.get("ValidityPeriod") == validity


async def test_messaging_service_replaces_from(sim: Simulator) -> None:
    service = "MG" + "ab" * 16
    twilio = TwilioProvider("svc", account(sim, from_number=None, messaging_service_sid=service))
    try:
        await twilio.send(sms())
    finally:
        await twilio.close()
    payload = sim.state("twilio").received[0].payload
    assert payload["MessagingServiceSid"] == service
    assert "From" not in payload


def test_account_needs_exactly_one_sender_and_hides_the_token() -> None:
    sid = "AC" + "0" * 32
    with pytest.raises(ValueError, match="exactly one"):
        TwilioAccount(account_sid=sid, auth_token="s3cret-token")
    valid = TwilioAccount(account_sid=sid, auth_token="s3cret-token", from_number="+1500")
    assert "s3cret-token" not in repr(valid)
    assert "s3cret-token" not in str(valid.model_dump())


async def test_invalid_number_is_refused_and_suppressed(
    sim: Simulator, provider: TwilioProvider
) -> None:
    with pytest.raises(PermanentError) as caught:
        await provider.send(sms(to="5551230001"))  # not E.164
    assert caught.value.effect is Effect.SUPPRESS_ADDRESS
    assert caught.value.reason == "invalid_number"
    assert sim.state("twilio").received == []


async def test_an_api_key_authenticates_instead_of_the_auth_token(sim: Simulator) -> None:
    config = sim.config
    keyed = account(
        sim,
        auth_token=None,
        api_key_sid=config.twilio_api_key_sid,
        api_key_secret=config.twilio_api_key_secret,
    )
    twilio = TwilioProvider("keyed", keyed)
    wrong = TwilioProvider(
        "wrong",
        account(sim, auth_token=None, api_key_sid=config.twilio_api_key_sid, api_key_secret="nope"),
    )
    try:
        assert (await twilio.send(sms())).provider_msg_id is not None
        with pytest.raises(TransientError, match="20003"):
            await wrong.send(sms())
    finally:
        await twilio.close()
        await wrong.close()
    with pytest.raises(ValueError, match="together"):
        account(sim, api_key_sid=config.twilio_api_key_sid)
    with pytest.raises(ValueError, match="auth_token"):
        account(sim, auth_token=None)


def test_retry_after_is_honoured_in_seconds_and_as_a_date() -> None:
    body = {"code": 20429, "message": "Too Many Requests", "more_info": "", "status": 429}
    seconds = classify(httpx.Response(429, headers={"Retry-After": "7"}, json=body))
    assert seconds.retry_after == 7.0
    date = httpx.Response(503, headers={"Retry-After": "Wed, 21 Oct 2099 07:28:00 GMT"})
    later = classify(date)
    assert isinstance(later, TransientError)
    assert later.retry_after is not None and later.retry_after > 86_400


def test_other_4xx_without_a_json_body_is_permanent() -> None:
    error = classify(httpx.Response(404, text="not found"))
    assert isinstance(error, PermanentError)


async def test_a_repeated_delivery_carries_no_idempotency_token(
    sim: Simulator, provider: TwilioProvider
) -> None:
    """Twilio's Messages API has no idempotency key: a repeat is a second SMS (the contract
    suite counts it); the adapter does not pretend otherwise with Twilio's header."""
    message = sms()
    await provider.send(message)
    await provider.send(message)
    assert all("i-twilio-idempotency-token" not in r.payload for r in sim.state("twilio").received)


async def test_body_over_1600_characters_is_poison_and_not_sent(
    sim: Simulator, provider: TwilioProvider
) -> None:
    await provider.send(sms(text="x" * 1600))
    with pytest.raises(PoisonError):
        await provider.send(sms(text="x" * 1601))
    assert sim.state("twilio").counts["requests"] == 1


def test_segments_are_counted_by_encoding() -> None:
    assert num_segments("a" * 160) == 1
    assert num_segments("a" * 161) == 2
    assert num_segments("€" * 80) == 1  # extension characters take two septets
    assert num_segments("é" * 160) == 1  # é is in the GSM-7 basic set
    assert num_segments("ł" * 70) == 1  # not GSM-7: UCS-2
    assert num_segments("ł" * 71) == 2
