"""Provider webhooks: SendGrid events and Twilio status callbacks reach deliveries and the
suppression list. Messages are sent for real through the simulated providers, so the ids the
events carry (custom_args.delivery_id, X-Message-Id, the Twilio sid) are the real ones."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import httpx
import pytest
from pydantic import SecretStr

from tests.helpers import email_to, eventually, post, put_type, running_dispatcher
from tidings.providers.sendgrid import SendGridAccount, SendGridProvider
from tidings.providers.sendgrid.signature import EventWebhookSigner
from tidings.providers.twilio import TwilioAccount, TwilioProvider
from tidings.providers.twilio.signature import SIGNATURE_HEADER, compute_signature
from tidings.service import Service
from tidings.simulator.server import Simulator, SimulatorConfig

SG_KEY = "SG.webhook-test-key"
SIGNER = EventWebhookSigner()


@pytest.fixture
async def sim(tmp_path: Path) -> AsyncIterator[Simulator]:
    config = SimulatorConfig(credentials_dir=tmp_path / "credentials", sendgrid_api_key=SG_KEY)
    async with Simulator(config) as simulator:
        yield simulator


def sendgrid_account(sim: Simulator, **changes: Any) -> SendGridAccount:
    fields: dict[str, Any] = {
        "api_key": SecretStr(SG_KEY),
        "base_url": sim.url,
        "from_email": "noreply@tidings.example.com",
        "timeout": 5,
        "event_webhook_public_key": SIGNER.public_key,
    }
    return SendGridAccount(**(fields | changes))


def twilio_account(sim: Simulator) -> TwilioAccount:
    return TwilioAccount(
        account_sid=sim.config.twilio_account_sid,
        auth_token=SecretStr(sim.config.twilio_auth_token),
        from_number="+15005550006",
        base_url=sim.url,
        timeout=5,
    )


@pytest.fixture
def accounts(service: Service, sim: Simulator) -> None:
    accounts = {
        "sg": sendgrid_account(sim),
        "sg-unsigned": sendgrid_account(sim, event_webhook_public_key=None),
        "tw": twilio_account(sim),
    }
    service.settings = service.settings.model_copy(update={"accounts": accounts})


async def send_all(
    client: httpx.AsyncClient,
    service: Service,
    provider: Any,
    bodies: list[dict[str, Any]],
    addresses: tuple[str, ...],
) -> dict[str, dict[str, Any]]:
    """Accept ``bodies``, send them through ``provider``; each delivery by its address (the
    API masks addresses)."""
    await put_type(client, channels=("email", "sms"))
    ids = []
    for body in bodies:
        response = await post(client, body)
        assert response.status_code == 202, response.text
        ids.append(response.json()["id"])
    async with running_dispatcher(service, provider):
        await eventually(lambda: _sent(client, ids))
    await provider.close()
    found = {}
    for address, notification_id in zip(addresses, ids, strict=True):
        [item] = (await client.get(f"/v1/notifications/{notification_id}")).json()["deliveries"]
        found[address] = {**item, "notification_id": notification_id}
    return found


async def _sent(client: httpx.AsyncClient, ids: list[str]) -> bool:
    for notification_id in ids:
        response = await client.get(f"/v1/notifications/{notification_id}")
        if any(d["status"] != "SENT" for d in response.json()["deliveries"]):
            return False
    return True


async def delivery(client: httpx.AsyncClient, sent: dict[str, Any]) -> dict[str, Any]:
    response = await client.get(f"/v1/notifications/{sent['notification_id']}")
    found: dict[str, Any] = response.json()["deliveries"][0]
    return found


def kinds(item: dict[str, Any]) -> list[str]:
    return [entry["kind"] for entry in item["history"]]


# --- SendGrid ------------------------------------------------------------------------------


def sg_event(sim: Simulator, address: str, event: str, **fields: Any) -> dict[str, Any]:
    """An event as SendGrid posts it for the message the simulator received for ``address``."""
    [received] = [r for r in sim.state("sendgrid").received if r.address == address]
    custom_args = received.payload["personalizations"][0]["custom_args"]
    message_id = sim.state("sendgrid").answers[custom_args["delivery_id"]]
    return {
        "email": address,
        "timestamp": int(time.time()),
        "event": event,
        "sg_event_id": uuid.uuid4().hex,
        "sg_message_id": f"{message_id}.filterdrecv-p3mdw1-756b745b58-kmzbl-18-5F5FC76C-9.0",
        **custom_args,
        **fields,
    }


async def post_events(
    client: httpx.AsyncClient, events: Any, account: str = "sg", **sign: Any
) -> httpx.Response:
    body = json.dumps(events).encode()
    headers = {"Content-Type": "application/json", **SIGNER.sign(body, **sign)}
    return await client.post(f"/v1/webhooks/sendgrid/{account}", content=body, headers=headers)


async def send_emails(
    client: httpx.AsyncClient, service: Service, sim: Simulator, *addresses: str
) -> dict[str, dict[str, Any]]:
    provider = SendGridProvider("sg", sendgrid_account(sim))
    return await send_all(client, service, provider, [email_to(a) for a in addresses], addresses)


@pytest.mark.usefixtures("accounts")
async def test_sendgrid_batch_updates_deliveries_history_and_suppressions(
    client: httpx.AsyncClient, service: Service, sim: Simulator
) -> None:
    names = ("ana", "bob", "cy", "dee", "ed", "fay")
    sent = await send_emails(client, service, sim, *(f"{n}@example.com" for n in names))
    ana, bob, cy, dee, ed, fay = (f"{n}@example.com" for n in names)
    delivered = sg_event(sim, ana, "delivered")
    no_custom_args = sg_event(sim, dee, "delivered")
    del no_custom_args["delivery_id"]  # found by sg_message_id instead
    events = [
        sg_event(sim, ana, "processed"),
        delivered,
        sg_event(sim, ana, "open"),
        sg_event(sim, ana, "click", url="https://shop.example.com/orders/7"),
        dict(delivered),  # SendGrid retried: the same sg_event_id again
        sg_event(sim, bob, "bounce", type="bounce", status="5.1.1", reason="no such user"),
        sg_event(sim, bob, "delivered"),  # out of order: must not undo the bounce
        sg_event(sim, cy, "spamreport"),
        no_custom_args,
        sg_event(sim, ed, "bounce", type="blocked", status="5.7.1", reason="policy"),
        sg_event(sim, fay, "group_unsubscribe", asm_group_id=4),
    ]
    response = await post_events(client, events)
    assert response.status_code == 200, response.text
    assert response.json() == {
        "received": 11,
        "applied": 9,
        "duplicates": 1,
        "unmatched": 0,
        "ignored": 1,
    }

    statuses = {a: (await delivery(client, s))["status"] for a, s in sent.items()}
    assert statuses == {
        ana: "DELIVERED",
        bob: "BOUNCED",
        cy: "SENT",
        dee: "DELIVERED",
        ed: "SENT",
        fay: "SENT",
    }
    history = await delivery(client, sent[ana])
    assert kinds(history).count("delivered") == 1
    assert {"opened", "clicked"} <= set(kinds(history))
    [click] = [e for e in history["history"] if e["kind"] == "clicked"]
    assert click["detail"]["url"] == "https://shop.example.com/orders/7"
    assert "blocked" in kinds(await delivery(client, sent[ed]))
    assert "complained" in kinds(await delivery(client, sent[cy]))

    reasons = {}
    for address in sent:
        found = await client.get(f"/v1/suppressions/email/{address}")
        reasons[address] = found.json()["reason"] if found.status_code == 200 else None
    assert reasons == {
        ana: None,
        bob: "hard_bounce",
        cy: "complaint",
        dee: None,
        ed: None,
        fay: "unsubscribed",
    }

    # The whole batch again (SendGrid retries after a timeout): nothing changes.
    again = await post_events(client, events)
    assert again.json()["applied"] == 0
    assert again.json()["duplicates"] == 10
    assert kinds(await delivery(client, sent[ana])) == kinds(history)
    # A late "delivered" for the bounced message never moves it backwards.
    late = await post_events(client, [sg_event(sim, bob, "delivered")])
    assert late.json()["applied"] == 1
    assert (await delivery(client, sent[bob]))["status"] == "BOUNCED"


@pytest.mark.usefixtures("accounts")
async def test_sendgrid_refuses_bad_stale_missing_signatures(
    client: httpx.AsyncClient, service: Service, sim: Simulator
) -> None:
    sent = await send_emails(client, service, sim, "ana@example.com")
    events = [sg_event(sim, "ana@example.com", "bounce", type="bounce")]
    body = json.dumps(events).encode()
    forged = EventWebhookSigner().sign(body)
    stale = SIGNER.sign(body, timestamp=int(time.time()) - 301)
    for headers in (forged, stale, {}):
        response = await client.post("/v1/webhooks/sendgrid/sg", content=body, headers=headers)
        assert response.status_code == 401, response.text
        assert response.json()["error"]["code"] == "invalid_signature"
    assert (await delivery(client, sent["ana@example.com"]))["status"] == "SENT"
    assert (await client.get("/v1/suppressions/email/ana@example.com")).status_code == 404


@pytest.mark.usefixtures("accounts")
async def test_sendgrid_unsigned_unknown_and_malformed(client: httpx.AsyncClient) -> None:
    unsigned = await post_events(client, [], account="sg-unsigned")
    assert unsigned.status_code == 403
    assert "signed webhooks must be configured" in unsigned.json()["error"]["message"]
    for account in ("nope", "tw"):
        assert (await post_events(client, [], account=account)).status_code == 404
    for body in (b"not json", b'{"event": "delivered"}', b"[1, 2]"):
        response = await client.post(
            "/v1/webhooks/sendgrid/sg", content=body, headers=SIGNER.sign(body)
        )
        assert response.status_code == 400, response.text
        assert response.json()["error"]["code"] == "invalid_request"


# --- Twilio --------------------------------------------------------------------------------


async def send_sms(
    client: httpx.AsyncClient, service: Service, sim: Simulator, *numbers: str
) -> dict[str, dict[str, Any]]:
    provider = TwilioProvider("tw", twilio_account(sim), public_url=service.settings.public_url)
    bodies = [{"type": "order.confirmed", "to": {"phone": n}, "channels": ["sms"]} for n in numbers]
    return await send_all(client, service, provider, bodies, numbers)


def callback_url(sim: Simulator, number: str) -> str:
    [received] = [r for r in sim.state("twilio").received if r.address == number]
    url: str = received.payload["StatusCallback"]
    return url


async def post_callback(
    client: httpx.AsyncClient, url: str, form: dict[str, str], token: str, signed_url: str = ""
) -> httpx.Response:
    signature = compute_signature(token, signed_url or url, form)
    parts = urlsplit(url)
    return await client.post(
        parts.path + (f"?{parts.query}" if parts.query else ""),
        content=urlencode(form).encode(),
        headers={
            "Content-Type": "application/x-www-form-urlencoded",
            SIGNATURE_HEADER: signature,
        },
    )


def status_form(sid: str, status: str, **extra: str) -> dict[str, str]:
    return {
        "MessageSid": sid,
        "SmsSid": sid,
        "MessageStatus": status,
        "SmsStatus": status,
        "AccountSid": "AC0123456789abcdef0123456789abcdef",
        "From": "+15005550006",
        "ApiVersion": "2010-04-01",
        **extra,
    }


@pytest.mark.usefixtures("accounts")
async def test_twilio_callbacks_move_forward_and_suppress(
    client: httpx.AsyncClient, service: Service, sim: Simulator
) -> None:
    token = sim.config.twilio_auth_token
    ok, gone = "+5511912345678", "+5511987654321"
    sent = await send_sms(client, service, sim, ok, gone)
    url = callback_url(sim, ok)
    # The adapter's default: tidings' public URL (not the address the client used), naming
    # the delivery, so that a callback finds it even if the send's answer was lost.
    assert url == f"http://127.0.0.1:8000/v1/webhooks/twilio/tw?delivery={sent[ok]['id']}"
    sid = sent[ok]["providerMessageId"]

    response = await post_callback(client, url, status_form(sid, "delivered", To=ok), token)
    assert response.status_code == 200, response.text
    assert response.json()["applied"] == 1
    late = await post_callback(client, url, status_form(sid, "sent", To=ok), token)
    assert late.status_code == 200
    repeated = await post_callback(client, url, status_form(sid, "delivered", To=ok), token)
    assert repeated.json()["duplicates"] == 1
    item = await delivery(client, sent[ok])
    assert item["status"] == "DELIVERED"
    assert kinds(item).count("delivered") == 1

    failed = status_form(sent[gone]["providerMessageId"], "undelivered", To=gone, ErrorCode="30005")
    assert (await post_callback(client, callback_url(sim, gone), failed, token)).status_code == 200
    item = await delivery(client, sent[gone])
    # Accepted, then given up on: FAILED, and the number ends for SMS.
    assert (item["status"], item["failureKind"]) == ("FAILED", "permanent")
    [event] = [e for e in item["history"] if e["kind"] == "undelivered"]
    assert event["detail"]["error_code"] == "30005"
    found = await client.get(f"/v1/suppressions/sms/{gone}")
    assert found.status_code == 200
    assert found.json()["reason"] == "unknown_number"
    assert (await client.get(f"/v1/suppressions/sms/{ok}")).status_code == 404


@pytest.mark.usefixtures("accounts")
async def test_twilio_refuses_bad_signatures(
    client: httpx.AsyncClient, service: Service, sim: Simulator
) -> None:
    token = sim.config.twilio_auth_token
    number = "+5511912345678"
    sent = await send_sms(client, service, sim, number)
    url = callback_url(sim, number)
    form = status_form(sent[number]["providerMessageId"], "delivered")
    parts = urlsplit(url)
    internal = f"http://tidings{parts.path}?{parts.query}"  # not the URL Twilio called
    attempts = [
        await post_callback(client, url, form, "wrong-token"),
        await post_callback(client, url, form, token, signed_url=internal),
        await client.post(f"{parts.path}?{parts.query}", content=urlencode(form).encode()),
    ]
    assert [r.status_code for r in attempts] == [401, 401, 401]
    assert (await delivery(client, sent[number]))["status"] == "SENT"
    assert (await client.post("/v1/webhooks/twilio/sg", content=b"")).status_code == 404


# The mapping alone, event by event.

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("event", "kind", "status", "suppress"),
    [
        ({"event": "delivered"}, "delivered", "DELIVERED", None),
        ({"event": "bounce", "type": "bounce"}, "bounced", "BOUNCED", "hard_bounce"),
        ({"event": "bounce"}, "bounced", "BOUNCED", "hard_bounce"),
        ({"event": "bounce", "type": "blocked"}, "blocked", None, None),
        ({"event": "spamreport"}, "complained", None, "complaint"),
        ({"event": "unsubscribe"}, "unsubscribed", None, "unsubscribed"),
        ({"event": "group_unsubscribe"}, "unsubscribed", None, "unsubscribed"),
        ({"event": "open"}, "opened", None, None),
        ({"event": "click", "url": "https://x.example"}, "clicked", None, None),
        ({"event": "dropped", "reason": "Bounced Address"}, "dropped", "FAILED", "dropped"),
        ({"event": "deferred"}, "deferred", None, None),
        ({"event": "processed"}, None, None, None),
        ({"event": "something_new"}, None, None, None),
    ],
)
def test_each_sendgrid_event_maps_to_its_effect(
    event: dict[str, Any], kind: str | None, status: str | None, suppress: str | None
) -> None:
    from tidings.providers.sendgrid.events import sendgrid_event

    tracked = sendgrid_event({**event, "sg_message_id": "abc.filter0001", "sg_event_id": "e1"}, NOW)
    if kind is None:
        assert tracked is None
        return
    assert tracked is not None
    assert (tracked.kind, tracked.status, tracked.suppress) == (kind, status, suppress)
    assert tracked.key.provider_msg_id == "abc" and tracked.event_id == "e1"


@pytest.mark.parametrize(
    ("status", "code", "kind", "suppress", "failure"),
    [
        ("delivered", None, "delivered", None, None),
        ("undelivered", "30005", "undelivered", "unknown_number", "permanent"),
        ("failed", "30006", "undelivered", "landline", "permanent"),
        ("undelivered", "30003", "undelivered", None, "exhausted"),  # may reach it later
        ("undelivered", "30008", "undelivered", None, "exhausted"),
        ("undelivered", "30007", "undelivered", None, "permanent"),
        ("sent", None, None, None, None),
        ("queued", None, None, None, None),
    ],
)
def test_each_twilio_status_maps_to_its_effect(
    status: str, code: str | None, kind: str | None, suppress: str | None, failure: str | None
) -> None:
    from tidings.providers.twilio.events import twilio_callback

    form = {"MessageSid": "SM" + "0" * 32, "MessageStatus": status}
    if code:
        form["ErrorCode"] = code
    tracked = twilio_callback(form, NOW)
    if kind is None:
        assert tracked is None
        return
    assert tracked is not None and (tracked.kind, tracked.suppress) == (kind, suppress)
    assert (tracked.failure.kind.value if tracked.failure else None) == failure
