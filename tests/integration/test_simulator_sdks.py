"""The simulator, driven by the providers' own SDKs: each sends through it and gets the answer
the real provider would give, so the simulator cannot drift into a dialect only tidings'
adapters speak.

Where an SDK has no documented way to reach another host, the test says how it is pointed at
the simulator: firebase-admin's FCM URL is a class constant (patched here); aioapns goes
through its documented HTTP CONNECT proxy option to the simulator's TLS port. The blocking
SDKs (twilio, sendgrid, boto3, pywebpush, firebase-admin) run in a thread, so the in-process
simulator keeps serving on the event loop.
"""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from email.message import EmailMessage
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from tests.helpers import eventually
from tidings.simulator.apns import ApnsSimulator
from tidings.simulator.server import Simulator, SimulatorConfig

T = TypeVar("T")


@pytest.fixture
async def sim(tmp_path: Path) -> AsyncIterator[Simulator]:
    async with Simulator(SimulatorConfig(credentials_dir=tmp_path / "credentials")) as simulated:
        yield simulated


async def blocking(call: Callable[[], T]) -> T:
    return await asyncio.to_thread(call)


# --- Twilio ---------------------------------------------------------------------------------


def local_twilio(base_url: str) -> Any:
    """twilio's documented extension point, a custom HttpClient: the same requests, sent to
    the simulator instead of api.twilio.com."""
    from twilio.http.http_client import TwilioHttpClient

    class LocalTwilio(TwilioHttpClient):  # type: ignore[misc]
        def request(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
            local = url.replace("https://api.twilio.com", base_url)
            return super().request(method, local, *args, **kwargs)

    return LocalTwilio()


def twilio_client(sim: Simulator) -> Any:
    from twilio.rest import Client

    config = sim.config
    return Client(
        config.twilio_account_sid, config.twilio_auth_token, http_client=local_twilio(sim.url)
    )


async def test_twilio_creates_then_fetches_a_message(sim: Simulator) -> None:
    client = twilio_client(sim)
    created = await blocking(
        lambda: client.messages.create(to="+14155550123", from_="+15005550006", body="Code 1234")
    )
    assert created.sid.startswith("SM") and created.status == "queued"

    fetched = await blocking(lambda: client.messages(created.sid).fetch())

    assert fetched.sid == created.sid
    assert fetched.to == "+14155550123" and fetched.body == "Code 1234"
    assert fetched.status in ("queued", "delivered")

    async def delivered() -> Any:
        now = await blocking(lambda: client.messages(created.sid).fetch())
        return now if now.status == "delivered" else None

    settled = await eventually(delivered)  # after its report, as Twilio's callbacks said
    assert settled.error_code is None and settled.date_sent is not None


async def test_twilio_fetch_of_an_unknown_message_is_its_404(sim: Simulator) -> None:
    from twilio.base.exceptions import TwilioRestException

    client = twilio_client(sim)
    with pytest.raises(TwilioRestException) as raised:
        await blocking(lambda: client.messages("SM" + "0" * 32).fetch())
    assert raised.value.status == 404 and raised.value.code == 20404


async def test_twilio_errors_reach_the_sdk_as_twilio_codes(sim: Simulator) -> None:
    from twilio.base.exceptions import TwilioRestException

    sim.state("twilio").script("+14155550123", "21610")
    client = twilio_client(sim)
    with pytest.raises(TwilioRestException) as raised:
        await blocking(
            lambda: client.messages.create(to="+14155550123", from_="+15005550006", body="x")
        )
    assert raised.value.status == 400 and raised.value.code == 21610


SENDER, CONTENT = "whatsapp:+14155238886", "HX0123456789abcdef0123456789abcdef"


async def test_twilio_whatsapp_content_template_and_the_window(sim: Simulator) -> None:
    """The WhatsApp sender through twilio's client: an approved Content template is
    delivered; free text is created, then failed 63016 while the user has not written, and
    delivered once they have (within the 24-hour window); a ContentSid the account does not
    have, a From that is no WhatsApp sender, or a Body over 1,600 characters is refused at
    once."""
    from twilio.base.exceptions import TwilioRestException

    client = twilio_client(sim)
    to = "whatsapp:+5511912340001"

    def create(**fields: Any) -> Any:
        return client.messages.create(to=to, from_=fields.pop("from_", SENDER), **fields)

    async def final(sid: str) -> Any:
        now = await blocking(lambda: client.messages(sid).fetch())
        return now if now.status in ("delivered", "failed") else None

    variables = json.dumps({"1": "42"})
    template = await blocking(lambda: create(content_sid=CONTENT, content_variables=variables))
    assert (await eventually(lambda: final(template.sid))).status == "delivered"
    shut = await blocking(lambda: create(body="Your order shipped"))
    assert shut.status == "queued"  # accepted: WhatsApp refuses it afterwards
    failed = await eventually(lambda: final(shut.sid))
    assert (failed.status, failed.error_code) == ("failed", 63016)
    sim.http["twilio"].whatsapp.user_writes("+5511912340001", "where is it?")
    inside = await blocking(lambda: create(body="On its way"))
    assert (await eventually(lambda: final(inside.sid))).status == "delivered"
    for fields, code in (
        ({"content_sid": "HX" + "f" * 32}, 21655),
        ({"content_sid": CONTENT, "content_variables": "not json"}, 21656),
        ({"body": "hi", "from_": "whatsapp:+15005550006"}, 63007),
        ({"body": "x" * 1601}, 21617),
    ):
        with pytest.raises(TwilioRestException) as raised:
            await blocking(lambda f=fields: create(**f))  # type: ignore[misc]
        assert raised.value.code == code, fields


# --- SendGrid -------------------------------------------------------------------------------


def sendgrid_client(sim: Simulator) -> Any:
    from sendgrid import SendGridAPIClient

    return SendGridAPIClient(sim.config.sendgrid_api_key, host=sim.url)


async def test_sendgrid_dynamic_template_without_subject_is_accepted(sim: Simulator) -> None:
    from sendgrid.helpers.mail import Mail

    mail = Mail(from_email="tidings@example.com", to_emails="ada@example.com")
    mail.template_id = "d-" + "0123456789abcdef" * 2
    mail.dynamic_template_data = {"order": 7}

    answer = await blocking(lambda: sendgrid_client(sim).send(mail))

    assert answer.status_code == 202 and answer.headers["X-Message-Id"]
    [received] = sim.state("sendgrid").received
    assert received.payload["personalizations"][0]["dynamic_template_data"] == {"order": 7}
    assert "subject" not in received.payload


async def test_sendgrid_a_subject_per_personalization_is_accepted(sim: Simulator) -> None:
    from sendgrid.helpers.mail import Content, Mail, Personalization, To

    mail = Mail(from_email="tidings@example.com")
    for address, subject in (("ada@example.com", "For Ada"), ("bob@example.com", "For Bob")):
        personalization = Personalization()
        personalization.add_to(To(address))
        personalization.subject = subject
        mail.add_personalization(personalization)
    mail.add_content(Content("text/plain", "Hello"))

    answer = await blocking(lambda: sendgrid_client(sim).send(mail))

    assert answer.status_code == 202
    [received] = sim.state("sendgrid").received
    subjects = {p["to"][0]["email"]: p["subject"] for p in received.payload["personalizations"]}
    assert subjects == {"ada@example.com": "For Ada", "bob@example.com": "For Bob"}


async def test_sendgrid_without_any_subject_is_its_400(sim: Simulator) -> None:
    from python_http_client.exceptions import BadRequestsError
    from sendgrid.helpers.mail import Mail

    mail = Mail(
        from_email="tidings@example.com", to_emails="ada@example.com", plain_text_content="x"
    )
    with pytest.raises(BadRequestsError) as raised:
        await blocking(lambda: sendgrid_client(sim).send(mail))
    [error] = json.loads(raised.value.body)["errors"]
    assert error["field"] == "subject"


# --- Amazon SES v2 --------------------------------------------------------------------------


def ses_client(sim: Simulator) -> Any:
    import boto3

    ses = sim.config.ses
    return boto3.client(
        "sesv2",
        endpoint_url=sim.url,
        region_name=ses.region,
        aws_access_key_id=ses.access_key_id,
        aws_secret_access_key=ses.secret_access_key,
    )


def simple(sender: str, **extra: Any) -> dict[str, Any]:
    return {
        "FromEmailAddress": sender,
        "Destination": {"ToAddresses": ["ada@example.com"]},
        "Content": {"Simple": {"Subject": {"Data": "Hi"}, "Body": {"Text": {"Data": "Hello"}}}},
    } | extra


async def test_ses_sends_from_a_verified_identity(sim: Simulator) -> None:
    client = ses_client(sim)
    answer = await blocking(
        lambda: client.send_email(**simple("Tidings <noreply@tidings.example.com>"))
    )
    assert answer["MessageId"]
    assert sim.state("ses").received[0].address == "ada@example.com"


async def test_ses_refuses_an_unverified_from_as_message_rejected(sim: Simulator) -> None:
    client = ses_client(sim)
    with pytest.raises(client.exceptions.MessageRejected) as raised:
        await blocking(lambda: client.send_email(**simple("someone@elsewhere.test")))
    assert "not verified" in raised.value.response["Error"]["Message"]
    assert sim.state("ses").received == []


async def test_ses_refuses_an_unknown_configuration_set_as_not_found(sim: Simulator) -> None:
    client = ses_client(sim)
    with pytest.raises(client.exceptions.NotFoundException):
        await blocking(
            lambda: client.send_email(
                **simple("tidings@example.com", ConfigurationSetName="no-such-set")
            )
        )
    known = simple("tidings@example.com", ConfigurationSetName="tidings-events")
    assert (await blocking(lambda: client.send_email(**known)))["MessageId"]


async def test_ses_identities_and_sets_are_the_account_s_as_configured(sim: Simulator) -> None:
    async with httpx.AsyncClient(base_url=sim.url) as control:
        changed = await control.patch(
            "/_sim/ses/account",
            json={"verified_identities": ["shop.example"], "configuration_sets": ["ops"]},
        )
    assert changed.json() == {
        "verified_identities": ["shop.example"],
        "configuration_sets": ["ops"],
    }
    client = ses_client(sim)
    accepted = simple("billing@shop.example", ConfigurationSetName="ops")
    assert (await blocking(lambda: client.send_email(**accepted)))["MessageId"]
    with pytest.raises(client.exceptions.MessageRejected):
        await blocking(lambda: client.send_email(**simple("tidings@example.com")))


async def test_ses_raw_content_takes_sender_and_recipients_from_its_headers(
    sim: Simulator,
) -> None:
    message = EmailMessage()
    message["From"] = "Tidings <tidings@example.com>"
    message["To"] = "ada@example.com"
    message["Cc"] = "bob@example.com"
    message["Subject"] = "Raw"
    message.set_content("Hello")
    client = ses_client(sim)

    answer = await blocking(
        lambda: client.send_email(Content={"Raw": {"Data": message.as_bytes()}})
    )

    assert answer["MessageId"]
    [received] = sim.state("ses").received
    assert received.address == "ada@example.com"
    raw = base64.b64decode(received.payload["Content"]["Raw"]["Data"])
    assert b"Subject: Raw" in raw


async def test_ses_raw_content_from_an_unverified_sender_is_rejected(sim: Simulator) -> None:
    message = EmailMessage()
    message["From"] = "mallory@elsewhere.test"
    message["To"] = "ada@example.com"
    message.set_content("Hello")
    client = ses_client(sim)
    with pytest.raises(client.exceptions.MessageRejected):
        await blocking(lambda: client.send_email(Content={"Raw": {"Data": message.as_bytes()}}))


# --- Web Push -------------------------------------------------------------------------------


async def test_pywebpush_delivers_to_a_subscription(sim: Simulator) -> None:
    from pywebpush import webpush

    webpush_sim: Any = sim.http["webpush"]
    subscription = webpush_sim.subscribe()
    claims = {"sub": sim.config.webpush_vapid_subject}
    key = str(webpush_sim.vapid_key_path)

    answer = await blocking(
        lambda: webpush(subscription, '{"title": "Hi"}', vapid_private_key=key, vapid_claims=claims)
    )

    assert answer.status_code == 201
    [received] = sim.state("webpush").received
    assert received.payload["json"] == {"title": "Hi"}


async def test_pywebpush_to_a_revoked_subscription_is_gone(sim: Simulator) -> None:
    from pywebpush import WebPushException, webpush

    webpush_sim: Any = sim.http["webpush"]
    subscription = webpush_sim.subscribe()
    webpush_sim.unsubscribe(subscription["endpoint"])
    claims = {"sub": sim.config.webpush_vapid_subject}
    key = str(webpush_sim.vapid_key_path)
    with pytest.raises(WebPushException) as raised:
        await blocking(
            lambda: webpush(subscription, "x", vapid_private_key=key, vapid_claims=claims)
        )
    assert raised.value.response is not None and raised.value.response.status_code == 410


# --- FCM ------------------------------------------------------------------------------------

DEVICE = "cXf7Q2xZR1Gk3mW9abcdEf:APA91bHsimulated"  # a registration token


def service_account_info(sim: Simulator) -> dict[str, Any]:
    """The simulator's service-account key, its token_uri the simulator's token endpoint."""
    fcm: Any = sim.http["fcm"]
    info: dict[str, Any] = json.loads(Path(fcm.service_account_path).read_text())
    return info | {"token_uri": f"{sim.url}/token"}


@pytest.fixture
def firebase(sim: Simulator, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A firebase-admin app whose service account's token_uri is the simulator's (google-auth
    still signs for Google's token URL), and whose FCM URL is the simulator's: firebase-admin
    has no option for it, so its class constant is patched."""
    import firebase_admin
    from firebase_admin import credentials, messaging

    info = service_account_info(sim)
    url = f"{sim.url}/v1/projects/{{0}}/messages:send"
    monkeypatch.setattr(messaging._MessagingService, "FCM_URL", url)
    app = firebase_admin.initialize_app(credentials.Certificate(info), name=uuid.uuid4().hex)
    yield app
    firebase_admin.delete_app(app)


async def test_firebase_admin_sends_with_lower_case_android_priority(
    sim: Simulator, firebase: Any
) -> None:
    from firebase_admin import messaging

    message = messaging.Message(
        token=DEVICE,
        data={"order": "7"},
        notification=messaging.Notification(title="Shipped", body="Order 7"),
        android=messaging.AndroidConfig(priority="high", ttl=60),
    )

    name = await blocking(lambda: messaging.send(message, app=firebase))

    assert name.startswith(f"projects/{sim.config.push.fcm_project_id}/messages/")
    [received] = sim.state("fcm").received
    assert received.payload["android"]["priority"] == "high"
    assert sim.state("fcm").counts["token_grants"] == 1


async def test_firebase_admin_gets_fcm_errors_as_its_own_exceptions(
    sim: Simulator, firebase: Any
) -> None:
    from firebase_admin import messaging

    sim.state("fcm").script(DEVICE, "UNREGISTERED")
    message = messaging.Message(token=DEVICE, data={"a": "b"})
    with pytest.raises(messaging.UnregisteredError):
        await blocking(lambda: messaging.send(message, app=firebase))


async def test_google_auth_session_sends_to_an_installation_id(sim: Simulator) -> None:
    """google-auth's own session (the Firebase scope, Google's audience) sends to a Firebase
    installation ID, the target firebase-admin 7 names ``fid``."""
    from google.auth.transport.requests import AuthorizedSession
    from google.oauth2 import service_account

    info = service_account_info(sim)
    scopes = ["https://www.googleapis.com/auth/firebase.messaging"]
    credentials = service_account.Credentials.from_service_account_info(info, scopes=scopes)
    url = f"{sim.url}/v1/projects/{sim.config.push.fcm_project_id}/messages:send"
    body = {"message": {"fid": "cXf7Q2xZR1Gk3mW9abcdEf", "data": {"a": "b"}}}

    answer = await blocking(lambda: AuthorizedSession(credentials).post(url, json=body))

    assert answer.status_code == 200, answer.text
    assert sim.state("fcm").received[0].address == "cXf7Q2xZR1Gk3mW9abcdEf"


# --- APNs -----------------------------------------------------------------------------------


@pytest.fixture
async def aioapns_client(sim: Simulator, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Any]:
    """aioapns connects to the host and port constants of its protocol class, with no option
    to change them (its proxy option fails on Python 3.11: it hands asyncio a transport's
    socket wrapper), so they are patched to the simulator's TLS listener."""
    from aioapns import APNs
    from aioapns.connection import APNsProductionClientProtocol

    apns: Any = sim.http["apns"]
    assert isinstance(apns, ApnsSimulator) and apns.cert_file is not None
    monkeypatch.setattr(APNsProductionClientProtocol, "APNS_SERVER", apns.tls.host)
    monkeypatch.setattr(APNsProductionClientProtocol, "APNS_PORT", apns.tls.port)
    client = APNs(
        key=apns.key_path.read_text(),
        key_id=apns.key_id,
        team_id=apns.team_id,
        topic=apns.topic,
        use_sandbox=False,
        ssl_context=ssl.create_default_context(cafile=str(apns.cert_file)),
    )
    yield client
    client.pool.close()


async def test_aioapns_sends_over_tls_without_alpn(sim: Simulator, aioapns_client: Any) -> None:
    from aioapns import NotificationRequest

    device = "ab" * 32
    result = await aioapns_client.send_notification(
        NotificationRequest(device_token=device, message={"aps": {"alert": "Hi"}})
    )

    assert result.is_successful, result.description
    state = sim.state("apns")
    assert state.counts["tls_without_alpn"] == 1 and state.counts["received"] == 1
    assert state.received[0].payload["environment"] == "production"


async def test_aioapns_gets_apns_reasons(sim: Simulator, aioapns_client: Any) -> None:
    from aioapns import NotificationRequest

    device = "cd" * 32
    sim.state("apns").script(device, "Unregistered")
    result = await aioapns_client.send_notification(
        NotificationRequest(device_token=device, message={"aps": {"alert": "Hi"}})
    )
    assert not result.is_successful
    assert result.status == "410" and result.description == "Unregistered"


async def test_apns_error_answers_carry_the_apns_id(sim: Simulator) -> None:
    """Every APNs answer has the apns-id header: the request's, else a new one."""
    apns_id = str(uuid.uuid4())
    async with httpx.AsyncClient(http1=False, http2=True) as client:
        refused = await client.post(
            f"{sim.url}/3/device/{'ab' * 32}", json={"aps": {}}, headers={"apns-id": apns_id}
        )
        anonymous = await client.post(f"{sim.url}/3/device/{'ab' * 32}", json={"aps": {}})
    assert refused.status_code == 403 and refused.json() == {"reason": "MissingProviderToken"}
    assert refused.headers["apns-id"] == apns_id
    assert uuid.UUID(anonymous.headers["apns-id"])


# --- The control API ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("provider", "errors"),
    [("twilio", {"500": 0.4}), ("sendgrid", {"bogus": 0.5}), ("fcm", {"NOT_A_CODE": 0.1})],
)
async def test_unknown_error_names_are_refused_with_the_valid_ones(
    sim: Simulator, provider: str, errors: dict[str, float]
) -> None:
    async with httpx.AsyncClient(base_url=sim.url) as control:
        answer = await control.patch(f"/_sim/{provider}/behaviour", json={"errors": errors})
        scripted = await control.post(
            f"/_sim/{provider}/script", json={"address": "a", "error": next(iter(errors))}
        )
        after = await control.get(f"/_sim/{provider}/behaviour")
    assert answer.status_code == 422 and scripted.status_code == 422
    body = answer.json()
    assert body["field"] == "errors" and body["unknown"] == list(errors)
    assert "outage" in body["valid"] and len(body["valid"]) > 2
    assert after.json()["errors"] == {}
    assert sim.state(provider).scripts == {}


async def test_documented_error_names_are_taken(sim: Simulator) -> None:
    async with httpx.AsyncClient(base_url=sim.url) as control:
        twilio = await control.patch("/_sim/twilio/behaviour", json={"errors": {"20500": 0.4}})
        sendgrid = await control.patch("/_sim/sendgrid/behaviour", json={"errors": {"500": 0.1}})
        smtp = await control.post("/_sim/smtp/script", json={"address": "a", "error": "5.7.26"})
    assert twilio.status_code == 200 and twilio.json()["errors"] == {"20500": 0.4}
    assert sendgrid.status_code == 200 and smtp.status_code == 204


@pytest.mark.parametrize(
    ("behaviours", "named"),
    [
        ({"twilio": {"errors": {"500": 0.4}}}, r"behaviours\.twilio\.errors"),
        ({"sendgird": {"down": True}}, r"behaviours\.sendgird: no such provider"),
    ],
)
def test_a_configuration_naming_an_unknown_error_is_refused(
    behaviours: dict[str, Any], named: str
) -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match=named):
        SimulatorConfig.model_validate({"behaviours": behaviours})


async def test_apns_sandbox_is_the_host_a_request_names(sim: Simulator) -> None:
    """Apple tells its environments by host (aioapns' use_sandbox picks the development
    host, with the same path): a sandbox token is taken there, and only there."""
    import time

    import jwt

    apns: Any = sim.http["apns"]
    token = "ef" * 32
    apns.sandbox_tokens.add(token)
    provider_token = jwt.encode(
        {"iss": apns.team_id, "iat": int(time.time())},
        apns.key_path.read_text(),
        algorithm="ES256",
        headers={"kid": apns.key_id},
    )
    headers = {"authorization": f"bearer {provider_token}", "apns-topic": apns.topic}
    url = f"{sim.url}/3/device/{token}"
    body = {"aps": {"alert": "Hi"}}
    async with httpx.AsyncClient(http1=False, http2=True) as client:
        development = await client.post(
            url, json=body, headers=headers | {"host": "api.development.push.apple.com"}
        )
        production = await client.post(url, json=body, headers=headers)
    assert development.status_code == 200, development.text
    assert production.status_code == 400 and production.json()["reason"] == "BadDeviceToken"
    assert sim.state("apns").received[0].payload["environment"] == "sandbox"


# --- Slack ----------------------------------------------------------------------------------


async def test_slack_web_client_posts_a_message_and_reads_its_answer(sim: Simulator) -> None:
    """slack_sdk's WebClient, pointed at the simulator by its documented base_url."""
    from slack_sdk import WebClient

    client = WebClient(token=sim.config.slack_bot_token, base_url=f"{sim.url}/api/")
    blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": "*Shipped*"}}]
    answer = await blocking(
        lambda: client.chat_postMessage(channel="U0SIMUSER1", text="Shipped", blocks=blocks)
    )
    assert answer["ok"] is True
    assert answer["channel"] == "D0SIMUSER1"  # the bot's direct message with that user
    assert float(answer["ts"]) > 0
    [received] = sim.state("slack").received
    assert received.payload["blocks"] == blocks


async def test_slack_errors_reach_the_sdk_as_slack_error_codes(sim: Simulator) -> None:
    from slack_sdk import WebClient
    from slack_sdk.errors import SlackApiError

    client = WebClient(token="xoxb-another-token", base_url=f"{sim.url}/api/")
    with pytest.raises(SlackApiError) as refused:
        await blocking(lambda: client.chat_postMessage(channel="C0SIMCHAN1", text="hi"))
    assert refused.value.response["error"] == "invalid_auth"
    client = WebClient(token=sim.config.slack_bot_token, base_url=f"{sim.url}/api/")
    sim.state("slack").script("C0SIMCHAN1", "not_in_channel")
    with pytest.raises(SlackApiError) as refused:
        await blocking(lambda: client.chat_postMessage(channel="C0SIMCHAN1", text="hi"))
    assert refused.value.response["error"] == "not_in_channel"
    # The SDK warns of a message without text, then sends it; Slack refuses it.
    with pytest.warns(UserWarning), pytest.raises(SlackApiError) as refused:
        await blocking(lambda: client.chat_postMessage(channel="C0SIMCHAN1"))
    assert refused.value.response["error"] == "no_text"
    assert sim.state("slack").counts["received"] == 0


async def test_slack_webhook_client_posts_and_gets_the_plain_text_answers(
    sim: Simulator,
) -> None:
    from slack_sdk.webhook import WebhookClient

    hook = WebhookClient(f"{sim.url}/services/T0SIM0001/B0SIM0001/s3cr3t")
    sent = await blocking(lambda: hook.send(text="Shipped"))
    assert (sent.status_code, sent.body) == (200, "ok")
    address = "https://hooks.slack.com/services/T0SIM0001/B0SIM0001/s3cr3t"
    sim.state("slack").script(address, "no_service")
    gone = await blocking(lambda: hook.send(text="Shipped"))
    assert (gone.status_code, gone.body) == (404, "no_service")
    assert [r.address for r in sim.state("slack").received] == [address]
