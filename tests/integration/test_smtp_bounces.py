"""SMTP bounces that arrive after acceptance: the VERP return path of the SMTP adapter, the
DSN parser (RFC 3464) on real-world-shaped reports, the bounce listener, and the whole loop:
tidings sends through the simulated SMTP server, which mails DSNs back to tidings' listener.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiosmtplib
import httpx
import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import SecretStr, ValidationError

from tests.email_providers import delivery, kinds, send_emails, status_is, suppression
from tests.helpers import email_to, eventually, post, put_type, running_dispatcher
from tests.messages import message
from tests.processes import free_port
from tidings.assembly import assemble_dispatcher
from tidings.priorities import Channel
from tidings.providers.base import Content
from tidings.providers.smtp import SmtpAccount, SmtpProvider
from tidings.providers.testing import ScriptedProvider
from tidings.service import Service, providers_from_settings
from tidings.settings import Settings
from tidings.simulator.behaviour import Behaviour
from tidings.simulator.server import Simulator, SimulatorConfig
from tidings.simulator.smtp import SmtpServer
from tidings.store.engine import connect
from tidings.store.schema import delivery as delivery_table
from tidings.store.schema import delivery_event
from tidings.store.schema import suppression as suppression_table
from tidings.tracking import dsn
from tidings.tracking.bounce_listener import BounceListener
from tidings.tracking.bounce_settings import BounceSettings
from tidings.tracking.dsn_events import bounce_events

DOMAIN = "bounces.tidings.test"
RETURN_PATH = f"bounces+{{delivery}}@{DOMAIN}"
FROM = "noreply@tidings.example.com"
NOW = datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)


def verp(delivery_id: uuid.UUID | str) -> str:
    return f"bounces+{delivery_id}@{DOMAIN}"


def original(delivery_id: uuid.UUID | str, to: str, cc: str | None = None) -> str:
    """The message tidings sent, as a report returns it."""
    copy = f"Cc: {cc}\r\n" if cc else ""
    return (
        f"From: Tidings <{FROM}>\r\n"
        f"To: {to}\r\n{copy}"
        "Subject: Your order\r\n"
        "Date: Tue, 14 Nov 2023 22:13:19 +0000\r\n"
        "Message-ID: <170000000.1234.5678@tidings.example.com>\r\n"
        f"X-Tidings-Delivery-Id: {delivery_id}\r\n"
        "MIME-Version: 1.0\r\n"
        'Content-Type: text/plain; charset="utf-8"\r\n'
        "Content-Transfer-Encoding: 7bit\r\n"
        "\r\n"
        "Thanks for your order.\r\n"
    )


def postfix_bounce(
    delivery_id: uuid.UUID | str,
    to: str = "nobody@example.com",
    status: str = "5.1.1",
    reply: str = "550 5.1.1 <{to}>: Recipient address rejected: User unknown in virtual "
    "mailbox table",
    message_id: str = "<20231114221320.4A1B21C0F2@mail.example.net>",
    final: str | None = None,
    cc: str | None = None,
) -> bytes:
    """A Postfix bounce: notification, delivery report, the whole original."""
    final = final or to
    boundary = "4A1B21C0F2.1700000000/mail.example.net"
    text = f"""Return-Path: <>
Received: by mail.example.net (Postfix) id 4A1B21C0F2; Tue, 14 Nov 2023 22:13:20 +0000 (UTC)
Date: Tue, 14 Nov 2023 22:13:20 +0000 (UTC)
From: MAILER-DAEMON@mail.example.net (Mail Delivery System)
Subject: Undelivered Mail Returned to Sender
To: {verp(delivery_id)}
Auto-Submitted: auto-replied
MIME-Version: 1.0
Content-Type: multipart/report; report-type=delivery-status;
\tboundary="{boundary}"
Content-Transfer-Encoding: 7bit
Message-Id: {message_id}

This is a MIME-encapsulated message.

--{boundary}
Content-Description: Notification
Content-Type: text/plain; charset=us-ascii

This is the mail system at host mail.example.net.

I'm sorry to have to inform you that your message could not
be delivered to one or more recipients. It's attached below.

                   The mail system

<{final}>: host mx.example.com[192.0.2.25] said: {reply.format(to=final)}
    (in reply to RCPT TO command)

--{boundary}
Content-Description: Delivery report
Content-Type: message/delivery-status

Reporting-MTA: dns; mail.example.net
X-Postfix-Queue-ID: 4A1B21C0F2
X-Postfix-Sender: rfc822; {verp(delivery_id)}
Arrival-Date: Tue, 14 Nov 2023 22:13:19 +0000 (UTC)

Final-Recipient: rfc822; {final}
Original-Recipient: rfc822;{final}
Action: failed
Status: {status}
Remote-MTA: dns; mx.example.com
Diagnostic-Code: smtp; {reply.format(to=final)}

--{boundary}
Content-Description: Undelivered Message
Content-Type: message/rfc822

{original(delivery_id, to, cc)}
--{boundary}--
"""
    return text.replace("\n", "\r\n").replace("\r\r\n", "\r\n").encode()


def gmail_bounce(delivery_id: uuid.UUID | str, to: str = "nobody@gmail.com") -> bytes:
    """Gmail's: the report in multipart/related + alternative, a folded multi-line
    Diagnostic-Code, the original attached; mailed to a plain (non-VERP) address."""
    text = f"""Delivered-To: bounces@{DOMAIN}
Return-Path: <>
From: Mail Delivery Subsystem <mailer-daemon@googlemail.com>
To: bounces@{DOMAIN}
Auto-Submitted: auto-replied
Subject: Delivery Status Notification (Failure)
References: <170000000.1234.5678@tidings.example.com>
In-Reply-To: <170000000.1234.5678@tidings.example.com>
X-Failed-Recipients: {to}
Message-ID: <6553f1a0.050a0220.12ab3.0000.GMR@mx.google.com>
Date: Tue, 14 Nov 2023 14:13:20 -0800 (PST)
Content-Type: multipart/report; boundary="000000000000a1b2c3"; report-type=delivery-status
MIME-Version: 1.0

--000000000000a1b2c3
Content-Type: multipart/related; boundary="000000000000a1b2c4"

--000000000000a1b2c4
Content-Type: multipart/alternative; boundary="000000000000a1b2c5"

--000000000000a1b2c5
Content-Type: text/plain; charset="UTF-8"

** Address not found **

Your message wasn't delivered to {to} because the address couldn't be found, or is unable \
to receive mail.

--000000000000a1b2c5
Content-Type: text/html; charset="UTF-8"

<html><body><h2>Address not found</h2></body></html>

--000000000000a1b2c5--
--000000000000a1b2c4--
--000000000000a1b2c3
Content-Type: message/delivery-status

Reporting-MTA: dns; googlemail.com
Received-From-MTA: dns; smtp.tidings.example.com
Arrival-Date: Tue, 14 Nov 2023 14:13:19 -0800 (PST)
X-Original-Message-ID: <170000000.1234.5678@tidings.example.com>

Final-Recipient: rfc822; {to}
Action: failed
Status: 5.1.1
Remote-MTA: dns; gmail-smtp-in.l.google.com. (142.250.27.26, the server for the domain \
gmail.com.)
Diagnostic-Code: smtp; 550-5.1.1 The email account that you tried to reach does not exist.
 Please try 550-5.1.1 double-checking the recipient's email address for typos or
 550-5.1.1 unnecessary spaces. 550 5.1.1 https://support.google.com/mail/?p=NoSuchUser - gsmtp
Last-Attempt-Date: Tue, 14 Nov 2023 14:13:20 -0800 (PST)

--000000000000a1b2c3
Content-Type: message/rfc822

{original(delivery_id, to)}
--000000000000a1b2c3--
"""
    return text.replace("\n", "\r\n").replace("\r\r\n", "\r\n").encode()


def exchange_bounce(delivery_id: uuid.UUID | str, to: str = "bob@contoso.com") -> bytes:
    """Exchange Online's NDR: quoted-printable notification, 5.1.10, headers returned only
    (text/rfc822-headers), compact ``type;value`` fields."""
    headers = original(delivery_id, to).partition("\r\n\r\n")[0]
    text = f"""From: postmaster@contoso.onmicrosoft.com
To: <{verp(delivery_id)}>
Date: Tue, 14 Nov 2023 22:13:21 +0000
Content-Type: multipart/report; report-type=delivery-status;
\tboundary="e6a1f1c4-3f3b-4c3e-9d1e-0c5c3f5e7a10"
Content-Language: en-US
Message-ID: <a1b2c3d4-e5f6-4711-8899-aabbccddeeff@AM0PR01MB1234.eurprd01.prod.exchangelabs.com>
In-Reply-To: <170000000.1234.5678@tidings.example.com>
Thread-Topic: Your order
Subject: Undeliverable: Your order
Auto-Submitted: auto-replied
X-MS-Exchange-Message-Is-Ndr:
MIME-Version: 1.0

--e6a1f1c4-3f3b-4c3e-9d1e-0c5c3f5e7a10
Content-Type: multipart/alternative; differences=Content-Type;
\tboundary="b2c3d4e5-0000-4000-8000-000000000001"

--b2c3d4e5-0000-4000-8000-000000000001
Content-Type: text/plain; charset="us-ascii"
Content-Transfer-Encoding: quoted-printable

Your message to {to} couldn't be delivered.=0D=0A=0D=0Abob wasn't found at c=
ontoso.com.

--b2c3d4e5-0000-4000-8000-000000000001
Content-Type: text/html; charset="us-ascii"
Content-Transfer-Encoding: quoted-printable

<html><body><p>Your message couldn't be delivered.</p></body></html>

--b2c3d4e5-0000-4000-8000-000000000001--

--e6a1f1c4-3f3b-4c3e-9d1e-0c5c3f5e7a10
Content-Type: message/delivery-status

Reporting-MTA: dns;AM0PR01MB1234.eurprd01.prod.exchangelabs.com
Received-From-MTA: dns;smtp.tidings.example.com
Arrival-Date: Tue, 14 Nov 2023 22:13:19 +0000

Final-Recipient: rfc822;{to}
Action: failed
Status: 5.1.10
Diagnostic-Code: smtp;550 5.1.10 RESOLVER.ADR.RecipientNotFound; Recipient not found by SMTP \
address lookup

--e6a1f1c4-3f3b-4c3e-9d1e-0c5c3f5e7a10
Content-Type: text/rfc822-headers

{headers}

--e6a1f1c4-3f3b-4c3e-9d1e-0c5c3f5e7a10--
"""
    return text.replace("\n", "\r\n").replace("\r\r\n", "\r\n").encode()


def postfix_delay(delivery_id: uuid.UUID | str, to: str = "slow@example.org") -> bytes:
    """A Postfix delay warning: Action delayed, the headers returned."""
    headers = original(delivery_id, to).partition("\r\n\r\n")[0]
    text = f"""From: MAILER-DAEMON@mail.example.net (Mail Delivery System)
Subject: Delayed Mail (still being retried)
To: {verp(delivery_id)}
Auto-Submitted: auto-replied
MIME-Version: 1.0
Content-Type: multipart/report; report-type=delivery-status; boundary="7B2C.1700014400/m"
Message-Id: <20231115021320.7B2C@mail.example.net>

--7B2C.1700014400/m
Content-Description: Notification
Content-Type: text/plain; charset=us-ascii

Your message could not be delivered for more than 4 hour(s).
It will be retried until it is 5 day(s) old.

--7B2C.1700014400/m
Content-Description: Delivery report
Content-Type: message/delivery-status

Reporting-MTA: dns; mail.example.net
Arrival-Date: Tue, 14 Nov 2023 22:13:19 +0000 (UTC)

Final-Recipient: rfc822; {to}
Action: delayed
Status: 4.4.1
Diagnostic-Code: X-Postfix; connect to mx.example.org[192.0.2.7]:25: Connection timed out
Will-Retry-Until: Sun, 19 Nov 2023 22:13:19 +0000 (UTC)

--7B2C.1700014400/m
Content-Description: Undelivered Message Headers
Content-Type: text/rfc822-headers

{headers}

--7B2C.1700014400/m--
"""
    return text.replace("\n", "\r\n").replace("\r\r\n", "\r\n").encode()


AUTO_REPLY = b"""From: Ana <ana@example.com>\r
To: bounces@bounces.tidings.test\r
Subject: Out of office: Your order\r
Auto-Submitted: auto-replied\r
Message-ID: <ooo-1@example.com>\r
Content-Type: text/plain; charset=utf-8\r
\r
I am away until Monday and will reply when I am back.\r
"""

# A spam complaint (ARF, RFC 5965) is a multipart/report too, but not a DSN.
COMPLAINT = b"""From: abuse@isp.example\r
To: bounces@bounces.tidings.test\r
Subject: complaint\r
MIME-Version: 1.0\r
Content-Type: multipart/report; report-type=feedback-report; boundary="arf"\r
\r
--arf\r
Content-Type: text/plain\r
\r
A complaint.\r
--arf\r
Content-Type: message/feedback-report\r
\r
Feedback-Type: abuse\r
User-Agent: isp/1.0\r
Version: 1\r
\r
--arf--\r
"""


# --- The VERP return path ------------------------------------------------------------------


def sim_account(sim: Simulator, **changes: Any) -> SmtpAccount:
    server = sim.servers["smtp"]
    assert isinstance(server, SmtpServer)
    fields: dict[str, Any] = {
        "host": "127.0.0.1",
        "port": server.port,
        "tls": sim.config.smtp_tls,
        "username": sim.config.smtp_username,
        "password": SecretStr(sim.config.smtp_password),
        "from_address": FROM,
        "from_name": "Tidings",
        "ca_file": server.cert_file,
        "timeout": 5,
    }
    return SmtpAccount(**(fields | changes))


@pytest.mark.parametrize("return_path", [RETURN_PATH, None])
async def test_the_return_path_is_the_envelope_sender_naming_the_delivery(
    tmp_path: Path, return_path: str | None
) -> None:
    async with Simulator(SimulatorConfig(credentials_dir=tmp_path / "credentials")) as sim:
        provider = SmtpProvider("smtp-sim", sim_account(sim, return_path=return_path))
        sent = message(Channel.EMAIL, "ana@example.com", Content(subject="Hi", text="Hello\n"))
        try:
            await provider.send(sent)
        finally:
            await provider.close()
        [received] = sim.state("smtp").received

    assert received.payload["mail_from"] == (verp(sent.delivery_id) if return_path else FROM)
    assert received.payload["headers"]["From"] == f"Tidings <{FROM}>"  # unchanged


@pytest.mark.parametrize(
    "template",
    [
        f"bounces@{DOMAIN}",  # no {delivery}
        f"b+{{delivery}}-{{delivery}}@{DOMAIN}",  # twice
        "bounces@{delivery}.example.com",  # in the domain
        "bounces+{delivery}",  # no domain
        f"bounces +{{delivery}}@{DOMAIN}",  # a space
        "bounces+{delivery}@",
        f"{'x' * 40}+{{delivery}}@{DOMAIN}",  # a local part over 64 characters once filled
    ],
)
def test_a_bad_return_path_is_refused_when_the_account_loads(template: str) -> None:
    with pytest.raises(ValidationError, match="return_path"):
        SmtpAccount(host="smtp.example.com", from_address=FROM, return_path=template)


def test_an_internationalised_return_path_domain_goes_out_in_a_labels() -> None:
    account = SmtpAccount(
        host="smtp.example.com", from_address=FROM, return_path="b+{delivery}@bücher.example"
    )
    sent = message(Channel.EMAIL, "ana@example.com", Content(subject="Hi", text="Hello\n"))
    envelope, _ = SmtpProvider("smtp", account)._render(sent)
    assert envelope.sender == f"b+{sent.delivery_id}@xn--bcher-kva.example"
    assert not envelope.smtputf8


# --- The DSN parser and what it means --------------------------------------------------------


def events(raw: bytes, mailed_to: tuple[str, ...] = ()) -> list[tuple[Any, ...]]:
    report = dsn.parse(raw)
    assert report is not None
    found = bounce_events(report, mailed_to or (str(report.recipients[0].recipient),), NOW)
    return [
        (e.key.delivery_id, e.kind, e.status, e.suppress, e.detail.get("status")) for e in found
    ]


def test_a_postfix_bounce() -> None:
    delivery_id = uuid.uuid4()
    report = dsn.parse(postfix_bounce(delivery_id))

    assert report is not None
    assert report.report_id == "<20231114221320.4A1B21C0F2@mail.example.net>"
    assert report.reporting_mta == "mail.example.net"
    [status] = report.recipients
    assert status.recipient == "nobody@example.com" and status.action == "failed"
    assert status.status == "5.1.1" and status.remote_mta == "mx.example.com"
    assert status.diagnostic is not None and status.diagnostic.startswith("550 5.1.1 <nobody@")
    assert report.original.delivery_id == str(delivery_id)
    [tracked] = bounce_events(report, [verp(delivery_id)], NOW)
    assert tracked.key.delivery_id == delivery_id
    assert (tracked.kind, tracked.status, tracked.suppress) == ("bounced", "BOUNCED", "hard_bounce")
    assert tracked.event_id == f"dsn:{report.report_id}:nobody@example.com"


def test_a_gmail_bounce_to_a_plain_address_finds_the_delivery_by_the_returned_header() -> None:
    delivery_id = uuid.uuid4()
    report = dsn.parse(gmail_bounce(delivery_id))

    assert report is not None
    [status] = report.recipients
    assert status.status == "5.1.1" and status.recipient == "nobody@gmail.com"
    assert status.diagnostic is not None and "NoSuchUser" in status.diagnostic
    assert events(gmail_bounce(delivery_id), (f"bounces@{DOMAIN}",)) == [
        (delivery_id, "bounced", "BOUNCED", "hard_bounce", "5.1.1")
    ]


def test_an_exchange_report_returning_only_the_headers() -> None:
    delivery_id = uuid.uuid4()
    report = dsn.parse(exchange_bounce(delivery_id))

    assert report is not None
    assert report.reporting_mta == "AM0PR01MB1234.eurprd01.prod.exchangelabs.com"
    [status] = report.recipients
    assert (status.recipient, status.status) == ("bob@contoso.com", "5.1.10")
    assert report.original.delivery_id == str(delivery_id)
    assert report.original.to == ("bob@contoso.com",)
    assert events(exchange_bounce(delivery_id), (verp(delivery_id),)) == [
        (delivery_id, "bounced", "BOUNCED", "hard_bounce", "5.1.10")
    ]


def test_a_delay_warning_is_recorded_only() -> None:
    delivery_id = uuid.uuid4()
    assert events(postfix_delay(delivery_id), (verp(delivery_id),)) == [
        (delivery_id, "deferred", None, None, "4.4.1")
    ]


@pytest.mark.parametrize(
    ("status", "reply", "kind", "suppress"),
    [
        ("5.1.1", "550 5.1.1 <{to}>: User unknown", "bounced", "hard_bounce"),
        ("5.1.2", "550 5.1.2 <{to}>: Domain not found", "bounced", "hard_bounce"),
        ("5.1.8", "553 5.1.8 <{to}>: Sender address rejected", "bounced", None),  # ours
        ("5.7.1", "550 5.7.1 <{to}>: Message rejected due to local policy", "blocked", None),
        ("5.2.2", "552 5.2.2 <{to}>: Mailbox full", "soft_bounced", None),
        ("4.4.7", "Delivery time expired", "soft_bounced", None),  # the server gave up
        ("5.4.4", "554 5.4.4 Unrouteable address", "bounced", None),
    ],
)
def test_a_failure_is_bounced_and_only_a_bad_mailbox_or_domain_is_suppressed(
    status: str, reply: str, kind: str, suppress: str | None
) -> None:
    delivery_id = uuid.uuid4()
    raw = postfix_bounce(delivery_id, status=status, reply=reply)
    assert events(raw, (verp(delivery_id),)) == [(delivery_id, kind, "BOUNCED", suppress, status)]


def test_a_report_about_a_copy_is_not_the_deliverys() -> None:
    delivery_id = uuid.uuid4()
    raw = postfix_bounce(
        delivery_id, to="ana@example.com", cc="carl@example.com", final="carl@example.com"
    )
    report = dsn.parse(raw)
    assert report is not None and report.original.cc == ("carl@example.com",)
    assert bounce_events(report, [verp(delivery_id)], NOW) == []


def test_a_report_about_a_blind_copy_is_not_the_deliverys() -> None:
    """A bcc is in no header: any recipient but the original's To is a copy's."""
    delivery_id = uuid.uuid4()
    raw = postfix_bounce(delivery_id, to="ana@example.com", final="archive@example.com")
    report = dsn.parse(raw)
    assert report is not None and report.original.to == ("ana@example.com",)
    assert bounce_events(report, [verp(delivery_id)], NOW) == []


def test_a_report_naming_no_delivery_is_not_ours() -> None:
    raw = postfix_bounce("not-a-delivery-id")
    report = dsn.parse(raw)
    assert report is not None
    assert bounce_events(report, [f"bounces@{DOMAIN}"], NOW) == []


@pytest.mark.parametrize(
    "raw",
    [AUTO_REPLY, COMPLAINT, b"", b"garbage\x00\xff\r\n\r\n--", b"Content-Type: multipart/report"],
    ids=["auto-reply", "complaint", "empty", "garbage", "headers only"],
)
def test_what_is_not_a_dsn_is_none(raw: bytes) -> None:
    assert dsn.parse(raw) is None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=4000))
def test_random_bytes_never_raise(raw: bytes) -> None:
    report = dsn.parse(raw)
    if report is not None:
        bounce_events(report, [verp(uuid.uuid4())], NOW)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["postfix", "gmail", "exchange", "delay"]), st.data())
def test_damaged_reports_never_raise(sample: str, data: st.DataObject) -> None:
    make = {
        "postfix": postfix_bounce,
        "gmail": gmail_bounce,
        "exchange": exchange_bounce,
        "delay": postfix_delay,
    }
    raw = make[sample](uuid.uuid4())
    start = data.draw(st.integers(0, len(raw)))
    end = data.draw(st.integers(start, min(len(raw), start + 200)))
    damaged = raw[:start] + data.draw(st.binary(max_size=200)) + raw[end:]
    report = dsn.parse(damaged)
    if report is not None:
        bounce_events(report, [verp(uuid.uuid4())], NOW)


# --- The listener ----------------------------------------------------------------------------


def test_the_bounces_settings_from_a_file(tmp_path: Path) -> None:
    path = tmp_path / "tidings.toml"
    path.write_text('[bounces]\nlisten = "127.0.0.1:2526"\ndomain = "Bounces.Example.com"\n')
    bounces = Settings.load(path).bounces
    assert bounces is not None
    assert (bounces.host, bounces.port, bounces.domain) == (
        "127.0.0.1",
        2526,
        "bounces.example.com",
    )
    assert bounces.max_message_bytes == 1024 * 1024


@pytest.mark.parametrize("listen", ["2526", "localhost:", ":25", "127.0.0.1:99999", "[::1]"])
def test_a_listen_that_is_not_host_and_port_is_refused(listen: str) -> None:
    with pytest.raises(ValidationError, match="host:port"):
        BounceSettings(listen=listen, domain=DOMAIN)


@contextlib.asynccontextmanager
async def listening(service: Service, port: int = 0) -> AsyncIterator[BounceListener]:
    settings = BounceSettings(listen=f"127.0.0.1:{port}", domain=DOMAIN)
    # The accounts whose return path is at DOMAIN: the scripted provider's, the simulator's.
    listener = BounceListener(settings, service.db, {"scripted", "smtp-sim"})
    await listener.start()
    try:
        yield listener
    finally:
        await listener.stop()


async def mail(listener: BounceListener, raw: bytes, to: str) -> None:
    """Mail ``raw`` to the listener as a mail server mails a report: from ``<>``."""
    async with aiosmtplib.SMTP(hostname="127.0.0.1", port=listener.port, timeout=5) as client:
        await client.sendmail("", [to], raw)


async def test_a_dsn_bounces_its_delivery_and_suppresses_a_bad_mailbox(
    service: Service, client: httpx.AsyncClient
) -> None:
    sent = await send_emails(client, service, ScriptedProvider(), "nobody@example.com")
    item = sent["nobody@example.com"]
    async with listening(service) as listener:
        await mail(listener, postfix_bounce(item["id"]), verp(item["id"]))
        await mail(listener, postfix_bounce(item["id"]), verp(item["id"]))  # a repeat

    found = await delivery(client, item)
    assert found["status"] == "BOUNCED"
    assert kinds(found).count("bounced") == 1
    assert await suppression(client, "nobody@example.com") == "hard_bounce"
    assert listener.handler.counts["applied"] == 1
    assert listener.handler.counts["duplicates"] == 1


async def test_a_policy_refusal_bounces_without_suppressing_and_a_delay_is_history(
    service: Service, client: httpx.AsyncClient
) -> None:
    sent = await send_emails(
        client, service, ScriptedProvider(), "strict@example.com", "slow@example.org"
    )
    strict, slow = sent["strict@example.com"], sent["slow@example.org"]
    blocked = postfix_bounce(
        strict["id"],
        to="strict@example.com",
        status="5.7.1",
        reply="550 5.7.1 <{to}>: Message rejected due to local policy",
    )
    async with listening(service) as listener:
        await mail(listener, blocked, verp(strict["id"]))
        await mail(listener, postfix_delay(slow["id"]), verp(slow["id"]))

    found = await delivery(client, strict)
    assert found["status"] == "BOUNCED" and "blocked" in kinds(found)
    assert await suppression(client, "strict@example.com") is None
    found = await delivery(client, slow)
    assert found["status"] == "SENT" and "deferred" in kinds(found)


async def test_a_report_that_outruns_its_send_is_deferred_until_the_send_is_recorded(
    service: Service, client: httpx.AsyncClient
) -> None:
    await put_type(client, channels=("email",))
    response = await post(client, email_to("early@example.com"))
    notification = response.json()
    [item] = notification["deliveries"]
    raw = postfix_bounce(item["id"], to="early@example.com")
    async with listening(service) as listener:
        with pytest.raises(aiosmtplib.SMTPDataError) as deferred:
            await mail(listener, raw, verp(item["id"]))  # still PENDING: try again later
        async with running_dispatcher(service, ScriptedProvider()):
            await eventually(lambda: status_is(client, notification["id"], "SENT"))
        await mail(listener, raw, verp(item["id"]))  # the server's retry

    assert deferred.value.code == 451
    found = await delivery(client, {"notification_id": notification["id"]})
    assert found["status"] == "BOUNCED" and kinds(found).count("bounced") == 1
    assert listener.handler.counts["too_early"] == 1


async def test_a_dsn_for_an_unknown_delivery_and_what_is_not_a_dsn_change_nothing(
    service: Service,
) -> None:
    async with listening(service) as listener:
        await mail(listener, postfix_bounce(uuid.uuid4()), verp(uuid.uuid4()))
        await mail(listener, postfix_bounce("nothing"), f"postmaster@{DOMAIN}")
        await mail(listener, AUTO_REPLY, f"bounces@{DOMAIN}")
        await mail(listener, b"\x00\xff garbage", f"bounces@{DOMAIN}")

    counts = listener.handler.counts
    assert counts["received"] == 4 and counts["not_dsn"] == 2
    assert counts["unmatched"] == 2 and counts["applied"] == 0 and counts["errors"] == 0
    async with service.db.engine.connect() as conn:
        for table in (delivery_event, suppression_table, delivery_table):
            assert (await conn.execute(sa.select(sa.func.count()).select_from(table))).scalar() == 0


async def test_mail_for_another_domain_is_refused(service: Service) -> None:
    async with listening(service) as listener:
        with pytest.raises(aiosmtplib.SMTPRecipientsRefused) as refused:
            await mail(listener, postfix_bounce(uuid.uuid4()), "someone@example.com")
        # The listener goes on: the next report is accepted.
        await mail(listener, AUTO_REPLY, f"bounces@{DOMAIN}")

    [reply] = refused.value.recipients
    assert reply.code == 550 and "5.1.1" in reply.message
    assert listener.handler.counts["refused"] == 1 and listener.handler.counts["received"] == 1


async def test_an_oversized_message_is_refused(service: Service) -> None:
    big = postfix_bounce(uuid.uuid4()) + b"x" * 998 + (b"\r\n" + b"y" * 998) * 1100
    async with listening(service) as listener:
        with pytest.raises(aiosmtplib.SMTPResponseException) as refused:
            await mail(listener, big, f"bounces@{DOMAIN}")

    assert refused.value.code == 552
    assert listener.handler.counts["received"] == 0


async def test_a_database_that_cannot_be_reached_answers_451() -> None:
    """The sending server keeps the report and tries again later."""
    down = connect("postgresql://postgres@127.0.0.1:1/nowhere")
    listener = BounceListener(BounceSettings(listen="127.0.0.1:0", domain=DOMAIN), down, set())
    await listener.start()
    try:
        with pytest.raises(aiosmtplib.SMTPDataError) as refused:
            await mail(listener, postfix_bounce(uuid.uuid4()), verp(uuid.uuid4()))
    finally:
        await listener.stop()
        await down.dispose()
    assert refused.value.code == 451


# --- The whole loop --------------------------------------------------------------------------


async def rows(service: Service) -> dict[str, str]:
    query = sa.select(delivery_table.c.address, delivery_table.c.status)
    async with service.db.engine.connect() as conn:
        return {r.address: r.status for r in await conn.execute(query)}


async def suppressed(service: Service) -> dict[str, str]:
    query = sa.select(suppression_table.c.address, suppression_table.c.reason)
    async with service.db.engine.connect() as conn:
        return {r.address: r.reason for r in await conn.execute(query)}


async def settled(service: Service, sim: Simulator, total: int) -> bool:
    """Every delivery past SENDING, and every report mailed (or given up)."""
    found = await rows(service)
    if len(found) < total or any(s in ("PENDING", "SENDING") for s in found.values()):
        return False
    counts = sim.state("smtp").counts
    return counts["reports_posted"] + counts["reports_failed"] >= counts["reports_scheduled"]


@pytest.mark.timeout(300)
async def test_bounces_mailed_back_by_the_simulator_end_as_it_decided(
    service: Service, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    """200 emails through the simulated SMTP server with VERP; it bounces 5% of them with
    DSNs mailed to tidings' listener: exactly those are BOUNCED and suppressed."""
    port = free_port()
    config = SimulatorConfig(
        credentials_dir=tmp_path / "credentials",
        behaviours={"smtp": Behaviour(reports={"bounce": 0.05}, report_delay_ms=200)},
        smtp_dsn_relay=f"127.0.0.1:{port}",
    )
    await put_type(client, "receipt", channels=("email",))
    items = [
        {
            "idempotencyKey": str(uuid.uuid4()),
            "type": "receipt",
            "to": {"email": f"u{i}@example.com"},
        }
        for i in range(200)
    ]
    async with Simulator(config) as sim, listening(service, port) as listener:
        service.settings = service.settings.model_copy(
            update={
                "accounts": {"smtp-sim": sim_account(sim, return_path=RETURN_PATH)},
                "providers": {"email": ["smtp-sim"]},
            }
        )
        providers = providers_from_settings(service.settings)
        stop = asyncio.Event()
        dispatching = asyncio.create_task(assemble_dispatcher(service, providers).run(stop))
        try:
            answer = await client.post("/v1/notifications/batch", json={"notifications": items})
            assert answer.status_code == 200, answer.text
            await eventually(lambda: settled(service, sim, 200), within=120, interval=0.2)
        finally:
            stop.set()
            await asyncio.wait_for(dispatching, timeout=30)
            await providers.close()
        decided = dict(sim.state("smtp").reports)
        counts = sim.state("smtp").counts

    found = await rows(service)  # read again: settled's read may precede the last report
    bounced = {address for address, outcome in decided.items() if outcome == "bounce"}
    assert len(decided) == 200 and counts["reports_failed"] == 0
    assert 0 < len(bounced) < 30  # the mix did happen
    assert counts["reports_posted"] == len(bounced) == listener.handler.counts["applied"]
    assert {a for a, status in found.items() if status == "BOUNCED"} == bounced
    assert {status for a, status in found.items() if a not in bounced} == {"SENT"}
    assert await suppressed(service) == {address: "hard_bounce" for address in bounced}
