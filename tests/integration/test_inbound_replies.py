"""SMS keyword replies (Twilio's inbound webhook): STOP and its synonyms suppress, START and
UNSTOP lift what a STOP made, HELP is recorded; each keyword reply is kept, and acts, once
per MessageSid (a replayed signed request changes nothing), without its text, and is
listed for an admin."""

from __future__ import annotations

import httpx
import pytest
from twilio.request_validator import RequestValidator

from tidings.providers.twilio import TwilioAccount
from tidings.settings import Settings

TOKEN = "inbound-auth-token"
NUMBER = "+15550003333"


@pytest.fixture
def settings(settings: Settings) -> Settings:
    account = TwilioAccount(
        account_sid="AC" + "0" * 32, auth_token=TOKEN, from_number="+15550000000"
    )
    return settings.model_copy(update={"accounts": {"sms-main": account}})


async def reply(client: httpx.AsyncClient, settings: Settings, body: str, sid: str) -> int:
    form = {"From": NUMBER, "To": "+15550000000", "Body": body, "MessageSid": sid}
    url = f"{settings.public_url}/v1/webhooks/twilio/sms-main/inbound"
    signature = RequestValidator(TOKEN).compute_signature(url, form)
    answer = await client.post(
        "/v1/webhooks/twilio/sms-main/inbound",
        data=form,
        headers={"X-Twilio-Signature": signature},
    )
    return answer.status_code


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
async def test_keyword_replies_are_recorded_once_and_act(
    client: httpx.AsyncClient, settings: Settings
) -> None:
    assert await reply(client, settings, " help ", "SM1") == 200
    assert await reply(client, settings, "help", "SM1") == 200  # Twilio retrying: once
    assert await reply(client, settings, "Where is my order?", "SM2") == 200  # not kept
    assert await reply(client, settings, "STOP", "SM3") == 200
    suppressed = await client.get(f"/v1/suppressions/sms/{NUMBER}")
    assert suppressed.status_code == 200 and suppressed.json()["reason"] == "stop_reply"
    assert await reply(client, settings, "START", "SM4") == 200
    assert (await client.get(f"/v1/suppressions/sms/{NUMBER}")).status_code == 404

    listed = (await client.get("/v1/inbound-replies")).json()
    assert [(r["keyword"], r["action"]) for r in listed] == [
        ("START", "lifted"),
        ("STOP", "suppressed"),
        ("HELP", "none"),
    ]
    assert all(r["sender"] != NUMBER and r["sender"].endswith("33") for r in listed)
    helps = (await client.get("/v1/inbound-replies", params={"keyword": "help"})).json()
    assert [r["keyword"] for r in helps] == ["HELP"]
    bad = await client.get("/v1/inbound-replies", params={"keyword": "hello"})
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "keyword"


async def suppression_of(client: httpx.AsyncClient) -> str | None:
    found = await client.get(f"/v1/suppressions/sms/{NUMBER}")
    return str(found.json()["reason"]) if found.status_code == 200 else None


async def test_a_replayed_reply_acts_once(client: httpx.AsyncClient, settings: Settings) -> None:
    assert await reply(client, settings, "STOP", "SM1") == 200
    assert await reply(client, settings, "START", "SM2") == 200
    assert await suppression_of(client) is None
    assert await reply(client, settings, "STOP", "SM1") == 200  # replayed after the START
    assert await suppression_of(client) is None
    assert await reply(client, settings, "STOP", "SM3") == 200
    assert await reply(client, settings, "START", "SM2") == 200  # replayed after a new STOP
    assert await suppression_of(client) == "stop_reply"
    listed = (await client.get("/v1/inbound-replies")).json()
    assert [(r["keyword"], r["action"]) for r in listed] == [
        ("STOP", "suppressed"),
        ("START", "lifted"),
        ("STOP", "suppressed"),
    ]


async def test_every_opt_out_keyword_suppresses_and_unstop_lifts(
    client: httpx.AsyncClient, settings: Settings
) -> None:
    for n, word in enumerate(["UNSUBSCRIBE", "cancel", " End "]):
        assert await reply(client, settings, word, f"SM{n}-stop") == 200
        assert await suppression_of(client) == "stop_reply", word
        assert await reply(client, settings, "unstop", f"SM{n}-unstop") == 200
        assert await suppression_of(client) is None, word
    listed = (await client.get("/v1/inbound-replies")).json()
    assert [(r["keyword"], r["action"]) for r in reversed(listed)] == [
        ("UNSUBSCRIBE", "suppressed"),
        ("UNSTOP", "lifted"),
        ("CANCEL", "suppressed"),
        ("UNSTOP", "lifted"),
        ("END", "suppressed"),
        ("UNSTOP", "lifted"),
    ]


async def test_a_start_lifts_only_what_a_stop_made(
    client: httpx.AsyncClient, settings: Settings
) -> None:
    put = await client.put(f"/v1/suppressions/sms/{NUMBER}", json={"reason": "invalid_number"})
    assert put.status_code in (200, 201, 204), put.text
    assert await reply(client, settings, "START", "SM1") == 200
    assert await suppression_of(client) == "invalid_number"
    [listed] = (await client.get("/v1/inbound-replies")).json()
    assert (listed["keyword"], listed["action"]) == ("START", "none")
