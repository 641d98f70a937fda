"""Amazon SES: the SigV4 signer against AWS's published test suite and botocore, the adapter
against the simulated SES over loopback HTTP, and SES's bounce, complaint and delivery
notifications through SNS to POST /v1/webhooks/ses/{account}."""

from __future__ import annotations

import ast
import asyncio
import base64
import contextlib
import email
import email.policy
import json
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from unittest import mock

import httpx
import pytest
import sqlalchemy as sa
import uvicorn
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials as BotoCredentials
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from pydantic import SecretStr

import tidings.simulator
from tests.helpers import email_to, eventually, post, put_type, running_dispatcher
from tests.messages import message
from tests.processes import free_port
from tidings.api.app import create_app
from tidings.priorities import Channel
from tidings.providers.base import (
    Content,
    EmailSender,
    Message,
    PermanentError,
    PoisonError,
    TransientError,
)
from tidings.providers.ses import SesAccount, SesProvider
from tidings.providers.ses.errors import error_type
from tidings.providers.ses.events import ses_event
from tidings.providers.ses.receiver import CERTIFICATES
from tidings.providers.ses.sigv4 import Credentials, Scope, sign
from tidings.service import Service
from tidings.simulator.behaviour import Behaviour
from tidings.simulator.server import Simulator, SimulatorConfig
from tidings.simulator.ses.api import SesSimulator
from tidings.simulator.ses.config import SesConfig
from tidings.store.schema import delivery, suppression

KEY_ID = "AKIATESTSES000000001"
SECRET = "test/ses+secret/key"
REGION = "eu-west-1"
TOPIC = "arn:aws:sns:eu-west-1:123456789012:tidings-ses-test"
UNSUBSCRIBE = "<https://tidings.example.com/u/OPAQUE>, <mailto:u+OPAQUE@tidings.example.com>"


def ses_config(**changes: Any) -> SesConfig:
    fields = {
        "access_key_id": KEY_ID,
        "secret_access_key": SECRET,
        "region": REGION,
        "topic_arn": TOPIC,
        # What the tests send from, and through: SES refuses any other From or set.
        "verified_identities": ["tidings.example.com", "shop.example"],
        "configuration_sets": ["events", "tidings-events"],
    }
    return SesConfig(**(fields | changes))


@contextlib.asynccontextmanager
async def simulator(tmp_path: Path, **ses: Any) -> AsyncIterator[Simulator]:
    config = SimulatorConfig(credentials_dir=tmp_path / "credentials", ses=ses_config(**ses))
    async with Simulator(config) as sim:
        yield sim


@pytest.fixture
async def sim(tmp_path: Path) -> AsyncIterator[Simulator]:
    async with simulator(tmp_path) as simulated:
        yield simulated


def ses_account(sim: Simulator, **changes: Any) -> SesAccount:
    fields: dict[str, Any] = {
        "access_key_id": KEY_ID,
        "secret_access_key": SecretStr(SECRET),
        "region": REGION,
        "base_url": sim.url,
        "from_email": "noreply@tidings.example.com",
        "from_name": "Tidings",
        "timeout": 5,
        "sns_topic_arns": [TOPIC],
        "sns_trusted_origins": [sim.url],
    }
    return SesAccount(**(fields | changes))


@pytest.fixture
async def provider(sim: Simulator) -> AsyncIterator[SesProvider]:
    adapter = SesProvider("ses-main", ses_account(sim))
    yield adapter
    await adapter.close()


def make_message(address: str = "ada@example.com", **changes: Any) -> Message:
    content = Content(subject="Your order", text="Thanks.", html="<p>Thanks.</p>")
    return message(Channel.EMAIL, address, changes.pop("content", content), **changes)


# --- The signer ----------------------------------------------------------------------------

SUITE = Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
SUITE_TOKEN = "6e86291e8372ff2a2260956d9b8aae1d763fbf315fa00fa31553b73ebf194267"
SUITE_TIME = datetime(2015, 8, 30, 12, 36, tzinfo=UTC)
SUITE_SCOPE = Scope("us-east-1", "service")
FORM = [("Content-Type", "application/x-www-form-urlencoded")]
VANILLA = "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"


@pytest.mark.parametrize(
    ("case", "method", "path", "headers", "body", "token", "signed", "signature"),
    [
        ("get-vanilla", "GET", "/", [], b"", None, "host;x-amz-date", VANILLA),
        (
            "get-vanilla-query-order-key-case",
            "GET",
            "/?Param2=value2&Param1=value1",
            [],
            b"",
            None,
            "host;x-amz-date",
            "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500",
        ),
        (
            "get-vanilla-with-session-token",
            "GET",
            "/",
            [],
            b"",
            SUITE_TOKEN,
            "host;x-amz-date;x-amz-security-token",
            "07ec1639c89043aa0e3e2de82b96708f198cceab042d4a97044c66dd9f74e7f8",
        ),
        ("get-relative", "GET", "/example/..", [], b"", None, "host;x-amz-date", VANILLA),
        (
            "get-relative-relative",
            "GET",
            "/example1/example2/../..",
            [],
            b"",
            None,
            "host;x-amz-date",
            VANILLA,
        ),
        (
            "get-slashes",
            "GET",
            "//example//",
            [],
            b"",
            None,
            "host;x-amz-date",
            "9a624bd73a37c9a373b5312afbebe7a714a789de108f0bdfe846570885f57e84",
        ),
        (
            "get-slash-pointless-dot",
            "GET",
            "/./example",
            [],
            b"",
            None,
            "host;x-amz-date",
            "ef75d96142cf21edca26f06005da7988e4f8dc83a165a80865db7089db637ec5",
        ),
        (
            "get-space",
            "GET",
            "/example space/",
            [],
            b"",
            None,
            "host;x-amz-date",
            "652487583200325589f1fba4c7e578f72c47cb61beeca81406b39ddec1366741",
        ),
        (
            "get-unreserved",
            "GET",
            "/-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
            [],
            b"",
            None,
            "host;x-amz-date",
            "07ef7494c76fa4850883e2b006601f940f8a34d404d0cfa977f52a65bbf5f24f",
        ),
        (
            "post-x-www-form-urlencoded",
            "POST",
            "/",
            FORM,
            b"Param1=value1",
            None,
            "content-type;host;x-amz-date",
            "ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a",
        ),
    ],
)
def test_the_signer_gives_the_aws_test_suite_signatures(
    case: str,
    method: str,
    path: str,
    headers: list[tuple[str, str]],
    body: bytes,
    token: str | None,
    signed: str,
    signature: str,
) -> None:
    """AWS's Signature Version 4 test suite (credentials AKIDEXAMPLE, 2015-08-30 12:36 UTC,
    us-east-1, service "service")."""
    credentials = Credentials(SUITE.access_key_id, SUITE.secret_access_key, token)
    found = sign(
        method,
        path,
        [("Host", "example.amazonaws.com"), *headers],
        body,
        credentials,
        SUITE_SCOPE,
        SUITE_TIME,
    )
    assert found["X-Amz-Date"] == "20150830T123600Z"
    assert found["Authorization"] == (
        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
        f"SignedHeaders={signed}, Signature={signature}"
    )
    assert found.get("X-Amz-Security-Token") == token


def botocore_authorization(url: str, body: bytes, token: str | None, when: datetime) -> str:
    request = AWSRequest("POST", url, data=body, headers={"Content-Type": "application/json"})
    with mock.patch("botocore.auth.get_current_datetime", return_value=when.replace(tzinfo=None)):
        SigV4Auth(BotoCredentials(KEY_ID, SECRET, token), "ses", REGION).add_auth(request)
    authorization: str = request.headers["Authorization"]
    return authorization


@pytest.mark.parametrize("token", [None, "FwoGZXIvYXdzEBYaDH//session+token=="])
@pytest.mark.parametrize(
    "path",
    ["/v2/email/outbound-emails", "/v2/email/identities/a%40example.com", "/v2/x?b=2%203&a=1"],
)
def test_the_signer_agrees_with_botocore(path: str, token: str | None) -> None:
    host = f"email.{REGION}.amazonaws.com"
    body = json.dumps({"Content": {"Simple": {"Subject": {"Data": "é"}}}}).encode()
    when = datetime(2026, 3, 1, 8, 30, 5, tzinfo=UTC)
    ours = sign(
        "POST",
        path,
        [("Host", host), ("Content-Type", "application/json")],
        body,
        Credentials(KEY_ID, SECRET, token),
        Scope(REGION, "ses"),
        when,
    )
    assert ours["Authorization"] == botocore_authorization(
        f"https://{host}{path}", body, token, when
    )


# --- The adapter against the simulator ----------------------------------------------------


async def test_sends_the_documented_body(sim: Simulator, provider: SesProvider) -> None:
    headers = {
        "List-Unsubscribe": UNSUBSCRIBE,
        "List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
    }
    sent = make_message(type="newsletter.weekly", category="marketing", headers=headers)

    result = await provider.send(sent)

    [received] = sim.state("ses").received
    delivery_id = str(sent.delivery_id)
    assert result.provider == "ses-main"
    assert result.provider_msg_id == sim.state("ses").answers[delivery_id]
    assert received.idempotency_key == delivery_id
    assert received.payload == {
        "FromEmailAddress": "Tidings <noreply@tidings.example.com>",
        "Destination": {"ToAddresses": ["ada@example.com"]},
        "Content": {
            "Simple": {
                "Subject": {"Data": "Your order", "Charset": "UTF-8"},
                "Body": {
                    "Text": {"Data": "Thanks.", "Charset": "UTF-8"},
                    "Html": {"Data": "<p>Thanks.</p>", "Charset": "UTF-8"},
                },
                "Headers": [
                    {"Name": "X-Tidings-Delivery-Id", "Value": delivery_id},
                    {"Name": "List-Unsubscribe", "Value": UNSUBSCRIBE},
                    {"Name": "List-Unsubscribe-Post", "Value": "List-Unsubscribe=One-Click"},
                ],
            }
        },
        "EmailTags": [
            {"Name": "tidings_delivery_id", "Value": delivery_id},
            {"Name": "tidings_type", "Value": "newsletter_weekly"},
        ],
    }


async def test_non_ascii_words_go_as_encoded_words_and_the_domain_as_a_labels(
    sim: Simulator,
) -> None:
    adapter = SesProvider("ses", ses_account(sim, from_name="Zoë", configuration_set="events"))
    content = Content(subject="Pedido confirmado ✓", text="Olá")
    try:
        await adapter.send(make_message("ana@bücher.example", content=content))
    finally:
        await adapter.close()

    [received] = sim.state("ses").received
    body = received.payload
    assert body["Destination"]["ToAddresses"] == ["ana@xn--bcher-kva.example"]
    assert body["ConfigurationSetName"] == "events"
    subject = body["Content"]["Simple"]["Subject"]["Data"]
    assert subject.isascii() and subject.startswith("=?utf-8?")
    decoded = email.message_from_string(f"Subject: {subject}\n\n", policy=email.policy.default)
    assert decoded["Subject"] == "Pedido confirmado ✓"
    assert (
        body["FromEmailAddress"].isascii()
        and "<noreply@tidings.example.com>" in (body["FromEmailAddress"])
    )


async def test_the_types_sender_reply_to_and_copies(sim: Simulator, provider: SesProvider) -> None:
    sent = make_message(
        sender=EmailSender("billing@shop.example", "Shop Billing"),
        reply_to="help@shop.example",
        cc=("boss@example.com", "ADA@example.com", "zoë@example.com"),
        bcc=("archive@shop.example", "boss@example.com"),
    )

    await provider.send(sent)

    [received] = sim.state("ses").received
    body = received.payload
    assert body["FromEmailAddress"] == "Shop Billing <billing@shop.example>"
    assert body["ReplyToAddresses"] == ["help@shop.example"]
    # Without the recipient, repeats, or an address SES cannot write (no SMTPUTF8).
    assert body["Destination"] == {
        "ToAddresses": ["ada@example.com"],
        "CcAddresses": ["boss@example.com"],
        "BccAddresses": ["archive@shop.example"],
    }


async def test_headers_simple_content_cannot_carry_go_as_raw_mime(
    sim: Simulator, provider: SesProvider
) -> None:
    headers = {f"X-Extra-{i}": f"value {i}" for i in range(15)}  # 16 with the delivery id
    sent = make_message(headers=headers)

    await provider.send(sent)

    [received] = sim.state("ses").received
    raw = base64.b64decode(received.payload["Content"]["Raw"]["Data"])
    mime = email.message_from_bytes(raw, policy=email.policy.default)
    assert mime["X-Tidings-Delivery-Id"] == str(sent.delivery_id)
    assert mime["X-Extra-14"] == "value 14"
    assert mime["To"] == "ada@example.com"
    assert received.payload["EmailTags"][0]["Value"] == str(sent.delivery_id)


async def test_what_ses_cannot_send_fails_before_any_request(
    sim: Simulator, provider: SesProvider
) -> None:
    with pytest.raises(PermanentError) as utf8:
        await provider.send(make_message("zoë@example.com"))
    assert utf8.value.reason == "smtputf8_unsupported"
    for content, reason in [
        (Content(subject="Hi"), "empty_content"),
        (Content(subject="", text="Hi"), "empty_subject"),
    ]:
        with pytest.raises(PoisonError) as raised:
            await provider.send(make_message(content=content))
        assert raised.value.reason == reason
    with pytest.raises(PoisonError):
        await provider.send(make_message(headers={"X-Bad": "a\r\nBcc: x@example.com"}))
    assert sim.state("ses").counts["requests"] == 0


async def test_temporary_credentials_sign_the_session_token(tmp_path: Path) -> None:
    token = "FwoGZXIvYXdzEBYaDHsimulated+token=="
    async with simulator(tmp_path, session_token=token) as sim:
        with_token = SesProvider("ses", ses_account(sim, session_token=SecretStr(token)))
        without = SesProvider("ses", ses_account(sim))
        try:
            assert (await with_token.send(make_message())).provider_msg_id
            with pytest.raises(TransientError) as raised:
                await without.send(make_message())
        finally:
            await with_token.close()
            await without.close()
    assert raised.value.reason == "credentials"
    assert "security token included in the request is invalid" in str(raised.value)


async def test_a_stale_clock_is_refused_as_credentials(sim: Simulator) -> None:
    """AWS refuses a signature more than five minutes off its clock (our clock is wrong)."""
    adapter = SesProvider("ses", ses_account(sim), clock=lambda: 1_700_000_000.0)
    try:
        with pytest.raises(TransientError) as raised:
            await adapter.send(make_message())
    finally:
        await adapter.close()
    assert raised.value.reason == "credentials"
    assert "Signature expired" in str(raised.value)


def test_error_types_are_read_as_botocore_reads_them() -> None:
    header = httpx.Response(
        400,
        headers={"x-amzn-ErrorType": "MessageRejected:http://internal.amazon.com/coral/x/"},
        json={"message": "Illegal header"},
    )
    body_only = httpx.Response(
        400, json={"__type": "com.amazonaws.sesv2#SendingPausedException", "message": "paused"}
    )
    neither = httpx.Response(502, text="<html>Bad Gateway</html>")
    assert error_type(header) == ("MessageRejected", "Illegal header")
    assert error_type(body_only) == ("SendingPausedException", "paused")
    assert error_type(neither) == (None, "<html>Bad Gateway</html>")


async def test_the_simulator_checks_signatures_made_by_botocore(sim: Simulator) -> None:
    """Its SigV4 check is its own: a request signed by botocore, not by tidings, passes."""
    body = json.dumps(
        {
            "FromEmailAddress": "noreply@tidings.example.com",
            "Destination": {"ToAddresses": ["bob@example.com"]},
            "Content": {"Simple": {"Subject": {"Data": "Hi"}, "Body": {"Text": {"Data": "x"}}}},
        }
    ).encode()
    url = f"{sim.url}/v2/email/outbound-emails"
    request = AWSRequest("POST", url, data=body, headers={"Content-Type": "application/json"})
    SigV4Auth(BotoCredentials(KEY_ID, SECRET), "ses", REGION).add_auth(request)
    async with httpx.AsyncClient() as client:
        accepted = await client.post(url, content=body, headers=dict(request.headers))
        altered = await client.post(url, content=body + b" ", headers=dict(request.headers))
        anonymous = await client.post(url, content=body)
    assert accepted.status_code == 200 and accepted.json()["MessageId"]
    assert altered.status_code == 403
    assert altered.headers["x-amzn-ErrorType"].startswith("SignatureDoesNotMatchException:")
    assert anonymous.status_code == 403
    assert anonymous.headers["x-amzn-ErrorType"].startswith("MissingAuthenticationToken")


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


def test_the_simulator_imports_nothing_of_tidings_providers() -> None:
    """The simulated SES and SNS check what tidings does with code of their own: neither
    they nor anything they load comes from tidings.providers (or tidings.tracking)."""
    package = Path(tidings.simulator.__file__).parent / "ses"
    paths = sorted(package.glob("*.py"))
    assert {"api.py", "auth.py", "sns.py"} <= {path.name for path in paths}
    for path in paths:
        found = _imports(path)
        assert not {m for m in found if m.startswith(("tidings.providers", "tidings.tracking"))}
    loaded = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, tidings.simulator.ses; "
            "print(sorted(m for m in sys.modules if m.startswith("
            "('tidings.providers', 'tidings.tracking'))))",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert loaded.stdout.strip() == "[]"


# --- SNS notifications ----------------------------------------------------------------------


@pytest.fixture(autouse=True)
def fresh_certificates() -> Iterator[None]:
    CERTIFICATES.clear()
    yield
    CERTIFICATES.clear()


def use_accounts(service: Service, sim: Simulator, **changes: Any) -> None:
    accounts = {
        "ses": ses_account(sim, **changes),
    }
    service.settings = service.settings.model_copy(update={"accounts": accounts})


async def send_emails(
    client: httpx.AsyncClient, service: Service, sim: Simulator, *addresses: str
) -> dict[str, dict[str, Any]]:
    """Accept one email per address and send them through account ``ses``: each delivery
    (as the API shows it) by address."""
    await put_type(client, channels=("email",))
    ids = []
    for address in addresses:
        response = await post(client, email_to(address))
        assert response.status_code == 202, response.text
        ids.append(response.json()["id"])
    adapter = SesProvider("ses", service.settings.accounts["ses"])  # type: ignore[arg-type]
    try:
        async with running_dispatcher(service, adapter):
            await eventually(lambda: _all_sent(client, ids))
    finally:
        await adapter.close()
    return {a: await _delivery(client, i) for a, i in zip(addresses, ids, strict=True)}


async def _all_sent(client: httpx.AsyncClient, ids: list[str]) -> bool:
    """Past sending (notifications may have moved some on already)."""
    statuses = [(await _delivery(client, i))["status"] for i in ids]
    return not {"PENDING", "SENDING"} & set(statuses)


async def _delivery(client: httpx.AsyncClient, notification_id: str) -> dict[str, Any]:
    response = await client.get(f"/v1/notifications/{notification_id}")
    found: dict[str, Any] = {**response.json()["deliveries"][0], "notification": notification_id}
    return found


async def reread(client: httpx.AsyncClient, sent: dict[str, Any]) -> dict[str, Any]:
    return await _delivery(client, sent["notification"])


def topic(sim: Simulator) -> Any:
    ses = sim.http["ses"]
    assert isinstance(ses, SesSimulator)
    return ses.topic


def bounce(message_id: str, bounce_type: str = "Permanent", **mail: Any) -> dict[str, Any]:
    """An SES bounce notification, as the SES developer guide shows one."""
    return {
        "notificationType": "Bounce",
        "bounce": {
            "bounceType": bounce_type,
            "bounceSubType": "General",
            "bouncedRecipients": [
                {"emailAddress": "x", "status": "5.1.1", "diagnosticCode": "smtp; 550 5.1.1"}
            ],
            "timestamp": "2026-03-01T08:30:05.123Z",
            "feedbackId": f"0100{uuid.uuid4().hex}-000000",
        },
        "mail": {"messageId": message_id, "timestamp": "2020-01-01T08:30:04.000Z", **mail},
    }


async def post_sns(
    client: httpx.AsyncClient, envelope: dict[str, Any], account: str = "ses"
) -> httpx.Response:
    return await client.post(
        f"/v1/webhooks/ses/{account}",
        content=json.dumps(envelope).encode(),
        headers={"Content-Type": "text/plain; charset=UTF-8"},
    )


def kinds(item: dict[str, Any]) -> list[str]:
    return [entry["kind"] for entry in item["history"]]


async def reason(client: httpx.AsyncClient, address: str) -> str | None:
    found = await client.get(f"/v1/suppressions/email/{address}")
    return found.json()["reason"] if found.status_code == 200 else None


async def test_a_subscription_is_confirmed_at_sns(
    client: httpx.AsyncClient, service: Service, sim: Simulator
) -> None:
    use_accounts(service, sim)
    sns = topic(sim)

    response = await post_sns(client, sns.confirmation())

    assert response.status_code == 200, response.text
    assert response.json() == {"confirmed": True, "topicArn": TOPIC}
    assert sns.confirmed


@pytest.mark.parametrize("version", ["1", "2"])
async def test_a_permanent_bounce_suppresses_and_bounces_a_transient_one_records(
    client: httpx.AsyncClient, service: Service, tmp_path: Path, version: str
) -> None:
    async with simulator(tmp_path, sns_signature_version=version) as sim:
        use_accounts(service, sim)
        sent = await send_emails(client, service, sim, "ana@example.com", "bob@example.com")
        ana, bob = sent["ana@example.com"], sent["bob@example.com"]
        sns = topic(sim)
        hard = sns.notification(bounce(ana["providerMessageId"]))
        soft = sns.notification(bounce(bob["providerMessageId"], "Transient"))

        answers = [await post_sns(client, hard), await post_sns(client, soft)]
        again = await post_sns(client, hard)  # SNS retried

    assert [a.status_code for a in answers] == [200, 200], answers[0].text
    assert answers[0].json() == {
        "received": 1,
        "applied": 1,
        "duplicates": 0,
        "unmatched": 0,
        "ignored": 0,
    }
    assert again.json()["duplicates"] == 1
    ana, bob = await reread(client, ana), await reread(client, bob)
    assert ana["status"] == "BOUNCED" and kinds(ana).count("bounced") == 1
    [event] = [e for e in ana["history"] if e["kind"] == "bounced"]
    assert event["detail"]["status"] == "5.1.1" and event["detail"]["type"] == "Permanent"
    assert bob["status"] == "SENT" and "soft_bounced" in kinds(bob)
    assert await reason(client, "ana@example.com") == "hard_bounce"
    assert await reason(client, "bob@example.com") is None


async def test_event_publishing_finds_the_delivery_by_its_tag(
    client: httpx.AsyncClient, service: Service, sim: Simulator
) -> None:
    use_accounts(service, sim)
    sent = await send_emails(client, service, sim, "cy@example.com", "dee@example.com")
    cy, dee = sent["cy@example.com"], sent["dee@example.com"]
    sns = topic(sim)
    complaint = {
        "eventType": "Complaint",
        "complaint": {"complaintFeedbackType": "abuse", "feedbackId": "f-1"},
        # The tag alone: a message id of nobody's.
        "mail": {"messageId": "unknown", "tags": {"tidings_delivery_id": [cy["id"]]}},
    }
    delivered = {
        "eventType": "Delivery",
        "delivery": {"smtpResponse": "250 2.6.0 Message received"},
        "mail": {"messageId": dee["providerMessageId"], "tags": {"tidings_delivery_id": ["x"]}},
    }
    for event in (complaint, delivered):
        response = await post_sns(client, sns.notification(event))
        assert response.json()["applied"] == 1, response.text
    stranger = await post_sns(client, sns.notification(bounce("someone-else")))
    console = await post_sns(client, sns.notification({"hello": "world"}))

    assert stranger.json()["unmatched"] == 1
    assert console.json()["ignored"] == 1
    assert "complained" in kinds(await reread(client, cy))
    assert await reason(client, "cy@example.com") == "complaint"
    assert (await reread(client, dee))["status"] == "DELIVERED"


async def test_an_event_that_outruns_its_send_is_asked_again_later(
    client: httpx.AsyncClient, service: Service, sim: Simulator
) -> None:
    """SES can report before tidings has written the send's outcome: the delivery is still
    in progress, or no delivery has the message id yet. SNS retries a 5xx; nothing is
    recorded meanwhile, so the retry is not taken for a duplicate."""
    use_accounts(service, sim)
    await put_type(client, channels=("email",))
    accepted = await post(client, email_to("eve@example.com"))
    [pending] = accepted.json()["deliveries"]
    sns = topic(sim)
    early = sns.notification(
        {
            "eventType": "Delivery",
            "delivery": {},
            "mail": {"messageId": "not-yet", "tags": {"tidings_delivery_id": [pending["id"]]}},
        }
    )
    just_now = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    unknown = sns.notification(bounce("nobody-yet", timestamp=just_now))

    answers = [await post_sns(client, early), await post_sns(client, unknown)]

    assert [a.status_code for a in answers] == [503, 503]
    assert answers[0].json()["error"]["code"] == "not_yet_sent"
    adapter = SesProvider("ses", service.settings.accounts["ses"])  # type: ignore[arg-type]
    try:
        async with running_dispatcher(service, adapter):
            await eventually(lambda: _all_sent(client, [accepted.json()["id"]]))
    finally:
        await adapter.close()
    again = await post_sns(client, early)
    assert again.json()["applied"] == 1, again.text
    assert (await _delivery(client, accepted.json()["id"]))["status"] == "DELIVERED"


async def test_forged_altered_or_foreign_messages_are_refused(
    client: httpx.AsyncClient, service: Service, sim: Simulator
) -> None:
    use_accounts(service, sim)
    sent = await send_emails(client, service, sim, "ana@example.com")
    ana = sent["ana@example.com"]
    sns = topic(sim)
    genuine = sns.notification(bounce(ana["providerMessageId"]))
    forger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    signed = "".join(
        f"{n}\n{genuine[n]}\n" for n in ("Message", "MessageId", "Timestamp", "TopicArn", "Type")
    )
    forged_signature = forger.sign(signed.encode(), padding.PKCS1v15(), hashes.SHA1())
    altered_message = json.loads(genuine["Message"])
    altered_message["mail"]["messageId"] = "another"
    cases = {
        "forged": genuine | {"Signature": base64.b64encode(forged_signature).decode()},
        "altered": genuine | {"Message": json.dumps(altered_message)},
        "unsigned": {k: v for k, v in genuine.items() if k != "Signature"},
        "unknown version": genuine | {"SignatureVersion": "3"},
        "foreign host": genuine | {"SigningCertURL": "https://evil.example.com/cert.pem"},
        "lookalike host": genuine
        | {"SigningCertURL": f"https://sns.{REGION}.amazonaws.com.evil.example/c.pem"},
        "plain http": genuine | {"SigningCertURL": f"http://sns.{REGION}.amazonaws.com/c.pem"},
        "other region": genuine | {"SigningCertURL": "https://sns.us-east-1.amazonaws.com/c.pem"},
    }
    answers = {name: await post_sns(client, envelope) for name, envelope in cases.items()}
    other_topic = await post_sns(
        client, genuine | {"TopicArn": "arn:aws:sns:eu-west-1:999999999999:theirs"}
    )

    assert {name: a.status_code for name, a in answers.items()} == dict.fromkeys(cases, 401)
    assert all(a.json()["error"]["code"] == "invalid_signature" for a in answers.values())
    assert other_topic.status_code == 403
    assert other_topic.json()["error"]["code"] == "unknown_topic"
    assert (await reread(client, ana))["status"] == "SENT"
    assert await reason(client, "ana@example.com") is None
    # None of them was recorded: the genuine message still applies.
    assert (await post_sns(client, genuine)).json()["applied"] == 1


async def test_a_subscribe_url_off_sns_is_not_visited(
    client: httpx.AsyncClient, service: Service, sim: Simulator
) -> None:
    use_accounts(service, sim)
    sns = topic(sim)
    message = {k: v for k, v in sns.confirmation().items() if not k.startswith("Signature")}
    message["SubscribeURL"] = "https://169.254.169.254/latest/meta-data/"
    response = await post_sns(client, sns.sign_message(message))
    assert response.status_code == 400, response.text
    assert not sns.confirmed


async def test_malformed_requests_are_refused(
    client: httpx.AsyncClient, service: Service, sim: Simulator
) -> None:
    """Unknown and unconfigured accounts: tests/integration/contract/test_inbound.py."""
    use_accounts(service, sim)
    for body in (b"not json", b"[1]", b'{"Type": "Notification"}', b'{"Type": "Other"}'):
        response = await client.post("/v1/webhooks/ses/ses", content=body)
        assert response.status_code == 400, body


# --- The whole loop over real sockets ------------------------------------------------------


@contextlib.asynccontextmanager
async def serving(service: Service, port: int) -> AsyncIterator[None]:
    config = uvicorn.Config(create_app(service), port=port, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    try:
        await eventually(lambda: server.started)
        yield
    finally:
        server.should_exit = True
        await task


async def settled(service: Service, sim: Simulator, total: int) -> dict[str, str] | None:
    query = sa.select(delivery.c.address, delivery.c.status)
    async with service.db.engine.connect() as conn:
        found = {r.address: r.status for r in await conn.execute(query)}
    counts = sim.state("ses").counts
    posted = counts["reports_posted"] + counts["reports_failed"]
    if len(found) < total or "SENDING" in found.values() or "PENDING" in found.values():
        return None
    return found if posted >= counts["reports_scheduled"] else None


@pytest.mark.parametrize("configuration_set", [None, "tidings-events"])
async def test_notifications_come_back_signed_and_end_as_ses_said(
    client: httpx.AsyncClient, service: Service, tmp_path: Path, configuration_set: str | None
) -> None:
    """Sent through the simulated SES; its SNS topic asks tidings to confirm the
    subscription, then posts each email's outcome: tidings ends where SES said."""
    port = free_port()
    config = SimulatorConfig(
        credentials_dir=tmp_path / "credentials",
        ses=ses_config(sns_endpoint=f"http://127.0.0.1:{port}/v1/webhooks/ses/ses"),
        behaviours={
            "ses": Behaviour(
                reports={"bounce": 0.25, "soft_bounce": 0.15, "complaint": 0.15},
                # An event that outruns its send's outcome is answered 503 and posted again,
                # up to three times as SNS does (a second apart here, not SNS's 20 s).
                report_delay_ms=300,
                report_retry_ms=1000,
            )
        },
    )
    addresses = [f"user{i}@example.com" for i in range(24)]
    async with Simulator(config) as sim, serving(service, port):
        use_accounts(service, sim, configuration_set=configuration_set)
        await send_emails(client, service, sim, *addresses)
        found = await eventually(lambda: settled(service, sim, len(addresses)), within=30)
        assert topic(sim).confirmed
        assert sim.state("ses").counts["reports_failed"] == 0
        decided = dict(sim.state("ses").reports)

    expected = {"bounce": "BOUNCED", "soft_bounce": "SENT", "complaint": "DELIVERED"}
    assert found == {a: expected.get(decided[a], "DELIVERED") for a in addresses}
    reasons = {"bounce": "hard_bounce", "complaint": "complaint"}
    async with service.db.engine.connect() as conn:
        rows = await conn.execute(sa.select(suppression.c.address, suppression.c.reason))
        suppressed = {r.address: r.reason for r in rows}
    assert suppressed == {a: reasons[o] for a, o in decided.items() if o in reasons}
    assert {"bounce", "soft_bounce", "complaint", "delivered"} <= set(decided.values())


# --- The mapping alone ----------------------------------------------------------------------

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("event", "kind", "status", "suppress"),
    [
        (
            {"notificationType": "Bounce", "bounce": {"bounceType": "Permanent"}},
            "bounced",
            "BOUNCED",
            "hard_bounce",
        ),
        (
            {"eventType": "Bounce", "bounce": {"bounceType": "Transient"}},
            "soft_bounced",
            None,
            None,
        ),
        (
            {"eventType": "Bounce", "bounce": {"bounceType": "Undetermined"}},
            "soft_bounced",
            None,
            None,
        ),
        (
            {"notificationType": "Complaint", "complaint": {"complaintFeedbackType": "abuse"}},
            "complained",
            None,
            "complaint",
        ),
        ({"eventType": "Complaint", "complaint": {}}, "complained", None, "complaint"),
        (
            {"eventType": "Complaint", "complaint": {"complaintFeedbackType": "not-spam"}},
            "complained",
            None,
            None,
        ),
        ({"notificationType": "Delivery", "delivery": {}}, "delivered", "DELIVERED", None),
        ({"eventType": "Open", "open": {}}, "opened", None, None),
        ({"eventType": "Click", "click": {"link": "https://x.example"}}, "clicked", None, None),
        (
            {"eventType": "DeliveryDelay", "deliveryDelay": {"delayType": "MailboxFull"}},
            "deferred",
            None,
            None,
        ),
        ({"eventType": "Reject", "reject": {"reason": "Bad content"}}, "rejected", "FAILED", None),
        ({"eventType": "Send", "send": {}}, None, None, None),
        ({"eventType": "Rendering Failure"}, None, None, None),
        ({"something": "else"}, None, None, None),
    ],
)
def test_each_ses_event_maps_to_its_effect(
    event: dict[str, Any], kind: str | None, status: str | None, suppress: str | None
) -> None:
    tracked = ses_event({**event, "mail": {"messageId": "m-1"}}, "sns-1", NOW)
    if kind is None:
        assert tracked is None
        return
    assert tracked is not None
    assert (tracked.kind, tracked.status, tracked.suppress) == (kind, status, suppress)
    assert tracked.key.provider_msg_id == "m-1" and tracked.event_id


def test_feedback_ids_dedupe_what_both_forms_report() -> None:
    identity = {"notificationType": "Bounce", "bounce": {"feedbackId": "f-9"}, "mail": {}}
    published = {"eventType": "Bounce", "bounce": {"feedbackId": "f-9"}, "mail": {}}
    first, second = ses_event(identity, "sns-1", NOW), ses_event(published, "sns-2", NOW)
    assert first is not None and second is not None and first.event_id == second.event_id
