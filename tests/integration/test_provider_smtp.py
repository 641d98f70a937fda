"""The SMTP adapter against the simulator's aiosmtpd server, over real loopback sockets."""

from __future__ import annotations

import asyncio
import base64
import email
import email.header
import email.policy
import logging
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiosmtplib
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import SecretStr

from tests.messages import message
from tidings.priorities import Channel
from tidings.providers.base import (
    Content,
    EmailSender,
    Message,
    PermanentError,
    PoisonError,
    TransientError,
)
from tidings.providers.smtp import SmtpAccount, SmtpProvider
from tidings.providers.smtp.errors import classify_reply
from tidings.simulator.server import Simulator, SimulatorConfig
from tidings.simulator.smtp import SmtpServer
from tidings.states import Effect

UNSUBSCRIBE = (
    "<https://tidings.example.com/u/eyJkIjoiMDEyMzQ1Njc4OWFiY2RlZiJ9.c2lnbmF0dXJl>, "
    "<mailto:u+eyJkIjoiMDEyMzQ1Njc4OWFiY2RlZiJ9@tidings.example.com>"
)
ONE_CLICK = "List-Unsubscribe=One-Click"


def make_message(address: str = "ada@example.com", **changes: Any) -> Message:
    content = Content(subject="Your order", text="Thanks for your order.\n")
    return message(Channel.EMAIL, address, changes.pop("content", content), **changes)


def marketing(address: str = "ada@example.com") -> Message:
    return make_message(
        address,
        type="newsletter",
        category="marketing",
        headers={"List-Unsubscribe": UNSUBSCRIBE, "List-Unsubscribe-Post": ONE_CLICK},
        content=Content(subject="News", text="Hello\n", html="<p>Hello</p>"),
    )


def start(tmp_path: Path, tls: str = "starttls") -> Simulator:
    config = SimulatorConfig(credentials_dir=tmp_path / "credentials", smtp_tls=tls)  # type: ignore[arg-type]
    return Simulator(config)


def smtp_server(sim: Simulator) -> SmtpServer:
    server = sim.servers["smtp"]
    assert isinstance(server, SmtpServer)
    return server


def account(sim: Simulator, **changes: Any) -> SmtpAccount:
    server = smtp_server(sim)
    fields: dict[str, Any] = {
        "host": "127.0.0.1",
        "port": server.port,
        "tls": sim.config.smtp_tls,
        "username": sim.config.smtp_username,
        "password": SecretStr(sim.config.smtp_password),
        "from_address": "noreply@tidings.example.com",
        "from_name": "Tidings",
        "ca_file": server.cert_file,
        "timeout": 5,
    }
    return SmtpAccount(**(fields | changes))


@pytest.fixture
async def sim(tmp_path: Path) -> AsyncIterator[Simulator]:
    async with start(tmp_path) as simulator:
        yield simulator


@pytest.fixture
async def provider(sim: Simulator) -> AsyncIterator[SmtpProvider]:
    adapter = SmtpProvider("smtp-main", account(sim))
    yield adapter
    await adapter.close()


def received(sim: Simulator) -> list[dict[str, Any]]:
    return [r.payload for r in sim.state("smtp").received]


async def test_sends_a_mime_message_with_its_headers(
    sim: Simulator, provider: SmtpProvider
) -> None:
    message = marketing()
    result = await provider.send(message)

    assert result.provider == "smtp-main"
    [payload] = received(sim)
    raw: str = payload["raw"]
    parsed = email.message_from_string(raw, policy=email.policy.default)
    assert result.provider_msg_id == parsed["Message-ID"]
    assert result.provider_msg_id.endswith("@tidings.example.com>")
    assert f"\r\nList-Unsubscribe: {UNSUBSCRIBE}\r\n" in raw
    assert f"\r\nList-Unsubscribe-Post: {ONE_CLICK}\r\n" in raw
    assert parsed["X-Tidings-Delivery-Id"] == str(message.delivery_id)
    assert parsed["From"] == "Tidings <noreply@tidings.example.com>"
    assert parsed["To"] == "ada@example.com" and parsed["Subject"] == "News"
    assert parsed["Date"] is not None
    assert parsed.get_content_type() == "multipart/alternative"
    text = parsed.get_body(("plain",)).get_content()  # type: ignore[union-attr]
    html = parsed.get_body(("html",)).get_content()  # type: ignore[union-attr]
    assert (text, html) == ("Hello\r\n", "<p>Hello</p>\r\n")
    assert payload["mail_from"] == "noreply@tidings.example.com"
    assert payload["rcpt_tos"] == ["ada@example.com"]
    assert payload["tls"] is True


async def test_transactional_mail_has_no_unsubscribe_headers(
    sim: Simulator, provider: SmtpProvider
) -> None:
    await provider.send(make_message())

    [payload] = received(sim)
    assert "List-Unsubscribe" not in payload["raw"]
    parsed = email.message_from_string(payload["raw"], policy=email.policy.default)
    assert parsed.get_content_type() == "text/plain"


async def test_non_ascii_mail_is_sent_as_7bit(sim: Simulator, provider: SmtpProvider) -> None:
    content = Content(subject="Commande reçue ✓", text="Merci, Zoë.\n", html="<p>Zoë</p>")
    await provider.send(make_message(content=content))

    [payload] = received(sim)
    raw: str = payload["raw"]
    assert raw.isascii()
    parsed = email.message_from_string(raw, policy=email.policy.default)
    assert parsed["Subject"] == "Commande reçue ✓"
    text = parsed.get_body(("plain",)).get_content()  # type: ignore[union-attr]
    assert text.replace("\r\n", "\n") == "Merci, Zoë.\n"


async def test_message_headers_cannot_replace_ours_or_inject(
    sim: Simulator, provider: SmtpProvider
) -> None:
    message = make_message(headers={"From": "evil@example.net", "X-Campaign": "spring"})
    await provider.send(message)
    [payload] = received(sim)
    assert payload["headers"]["From"] == "Tidings <noreply@tidings.example.com>"
    assert payload["headers"]["X-Campaign"] == "spring"
    assert payload["raw"].count("\r\nFrom: ") == 0 and payload["raw"].startswith("From: ")

    with pytest.raises(PoisonError):
        await provider.send(make_message(headers={"X-Note": "a\r\nBcc: evil@example.net"}))
    assert len(received(sim)) == 1


async def test_reuses_one_connection_across_sends(sim: Simulator, provider: SmtpProvider) -> None:
    for index in range(5):
        await provider.send(make_message(f"user{index}@example.com"))

    assert provider.connections_opened == 1
    assert len({payload["peer"] for payload in received(sim)}) == 1


async def test_reconnects_after_the_server_closed_the_connection(
    sim: Simulator, provider: SmtpProvider
) -> None:
    await provider.send(make_message())
    sim.state("smtp").script("gone@example.com", "421")
    with pytest.raises(TransientError):
        await provider.send(make_message("gone@example.com"))

    await provider.send(make_message("back@example.com"))

    assert provider.connections_opened == 2
    assert [p["rcpt_tos"] for p in received(sim)] == [["ada@example.com"], ["back@example.com"]]


async def test_implicit_tls(tmp_path: Path) -> None:
    async with start(tmp_path, "implicit") as simulator:
        adapter = SmtpProvider("smtp", account(simulator))
        try:
            await adapter.send(marketing())
            plain = SmtpProvider("smtp", account(simulator, tls="none", timeout=0.5))
            with pytest.raises(TransientError):
                await plain.send(make_message())
            await plain.close()
        finally:
            await adapter.close()

        [payload] = received(simulator)
        assert payload["tls"] is True
        assert f"List-Unsubscribe-Post: {ONE_CLICK}" in payload["raw"]


async def test_no_tls(tmp_path: Path) -> None:
    async with start(tmp_path, "none") as simulator:
        adapter = SmtpProvider("smtp", account(simulator))
        try:
            await adapter.send(make_message())
        finally:
            await adapter.close()

        [payload] = received(simulator)
        assert payload["tls"] is False


async def test_concurrent_sends_share_a_bounded_pool(sim: Simulator) -> None:
    adapter = SmtpProvider("smtp", account(sim, max_connections=2))
    try:
        await asyncio.gather(*(adapter.send(make_message(f"u{i}@example.com")) for i in range(10)))
    finally:
        await adapter.close()

    assert len(received(sim)) == 10
    assert adapter.connections_opened <= 2
    assert len({payload["peer"] for payload in received(sim)}) <= 2


@pytest.mark.parametrize(
    ("code", "text", "recipient", "kind", "effect"),
    [
        (550, "5.1.1 <a@b>: User unknown", True, PermanentError, Effect.SUPPRESS_ADDRESS),
        (
            550,
            "5.1.10 Recipient address has null MX",
            True,
            PermanentError,
            Effect.SUPPRESS_ADDRESS,
        ),
        (550, "5.1.1 <a@b>: User unknown", False, PermanentError, None),  # the sender's
        (553, "5.1.8 Bad sender's system address", True, PermanentError, None),
        (550, "Requested action not taken: mailbox unavailable", True, PermanentError, None),
        (554, "5.3.4 Message too big for system", True, PoisonError, None),
        (452, "4.5.3 Too many recipients", True, TransientError, None),
        (535, "5.7.8 Authentication credentials invalid", False, TransientError, None),
        (503, "5.5.1 Error: nested MAIL command", True, TransientError, None),
        (553, "5.6.7 Must declare SMTPUTF8 to send unicode address", True, PermanentError, None),
    ],
)
def test_reply_classification(
    code: int, text: str, recipient: bool, kind: type[Exception], effect: Effect | None
) -> None:
    error = classify_reply(code, text, recipient=recipient)
    assert type(error) is kind
    assert error.effect == effect


# A failed or cancelled send must not leave its pooled session mid-transaction.


def slow_data(sim: Simulator, monkeypatch: pytest.MonkeyPatch) -> asyncio.Event:
    """While the returned event is set, the simulator delays its reply to DATA by 2 s.

    Patched before any connection: aiosmtpd reads a handler's hooks when a session starts.
    """
    handler = smtp_server(sim).handler
    original = handler.handle_DATA
    slow = asyncio.Event()

    async def handle_data(server: Any, session: Any, envelope: Any) -> str:
        if slow.is_set():
            await asyncio.sleep(2)
        return await original(server, session, envelope)

    monkeypatch.setattr(handler, "handle_DATA", handle_data)
    return slow


@pytest.mark.parametrize("phase", ["rcpt", "data"])
async def test_a_send_cancelled_mid_transaction_leaves_the_pool_usable(
    sim: Simulator, provider: SmtpProvider, monkeypatch: pytest.MonkeyPatch, phase: str
) -> None:
    state = sim.state("smtp")
    slow = slow_data(sim, monkeypatch)
    await provider.send(make_message("warm@example.com"))  # a pooled session, to be reused
    if phase == "rcpt":
        state.behaviour = state.behaviour.model_copy(update={"latency_ms": 2000})
    else:
        slow.set()

    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.3):  # as the dispatcher bounds a send
            await provider.send(make_message("slow@example.com"))

    state.behaviour = state.behaviour.model_copy(update={"latency_ms": 0})
    slow.clear()
    for index in range(100):
        await provider.send(make_message(f"user{index}@example.com"))

    tos = [payload["rcpt_tos"] for payload in received(sim)]
    assert tos == [["warm@example.com"]] + [[f"user{i}@example.com"] for i in range(100)]
    assert provider.connections_opened == 2  # the cancelled session was dropped, not reused


async def test_a_refused_recipient_leaves_the_session_reset_and_reused(
    sim: Simulator, provider: SmtpProvider
) -> None:
    sim.state("smtp").script("nobody@example.com", "5.1.1")
    with pytest.raises(PermanentError):
        await provider.send(make_message("nobody@example.com"))
    with pytest.raises(PermanentError) as raised:
        await provider.send(make_message("a b@example.com"))  # refused locally, after MAIL
    assert raised.value.reason == "bad_address"

    await provider.send(make_message("ada@example.com"))

    assert [p["rcpt_tos"] for p in received(sim)] == [["ada@example.com"]]
    assert provider.connections_opened == 1


@pytest.fixture
async def plain_sim(tmp_path: Path) -> AsyncIterator[Simulator]:
    """A simulator without TLS, for a hand-driven SMTP session."""
    async with start(tmp_path, "none") as simulator:
        yield simulator


@pytest.fixture
async def client(plain_sim: Simulator) -> AsyncIterator[aiosmtplib.SMTP]:
    config = plain_sim.config
    session = aiosmtplib.SMTP(
        hostname="127.0.0.1",
        port=smtp_server(plain_sim).port,
        username=config.smtp_username,
        password=config.smtp_password,
        start_tls=False,
        timeout=5,
    )
    await session.connect()  # EHLO and AUTH
    yield session
    session.close()


async def command(client: aiosmtplib.SMTP, *args: bytes) -> str:
    response = await client.execute_command(*args)
    return f"{response.code} {response.message}"


async def test_the_simulator_refuses_a_nested_mail_command(client: aiosmtplib.SMTP) -> None:
    assert (await command(client, b"MAIL", b"FROM:<a@example.com>")).startswith("250")
    reply = await command(client, b"MAIL", b"FROM:<b@example.com>")
    assert reply == "503 5.5.1 Error: nested MAIL command"  # Postfix's reply
    assert (await command(client, b"RSET")).startswith("250")
    assert (await command(client, b"MAIL", b"FROM:<b@example.com>")).startswith("250")


async def test_a_client_leaving_mid_transaction_does_not_wedge_the_simulator(
    plain_sim: Simulator, caplog: pytest.LogCaptureFixture
) -> None:
    port = smtp_server(plain_sim).port
    state = plain_sim.state("smtp")
    state.behaviour = state.behaviour.model_copy(update={"latency_ms": 500})
    auth = base64.b64encode(b"\0tidings\0simulator-password")
    envelope = [b"MAIL FROM:<a@example.com>", b"RCPT TO:<b@example.com>"]
    # Gone while the RCPT reply is due (it takes 0.5 s), then in the middle of a DATA.
    for script, wait in ((envelope, 0.2), ([*envelope, b"DATA", b"Subject: x"], 0.8)):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        await reader.readline()
        for line in [b"EHLO client.test", b"AUTH PLAIN " + auth, *script]:
            writer.write(line + b"\r\n")
        await writer.drain()
        await asyncio.sleep(wait)
        writer.close()
        await writer.wait_closed()

    state.behaviour = state.behaviour.model_copy(update={"latency_ms": 0})
    async with asyncio.timeout(10):
        adapter = SmtpProvider("smtp", account(plain_sim))
        try:
            await adapter.send(make_message())
        finally:
            await adapter.close()
    assert [p["rcpt_tos"] for p in received(plain_sim)] == [["ada@example.com"]]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


# Internationalised addresses: IDNA domains, SMTPUTF8 local parts (RFC 6531).


def with_smtputf8(sim: Simulator, offered: bool) -> None:
    state = sim.state("smtp")
    state.behaviour = state.behaviour.model_copy(update={"smtputf8": offered})


@pytest.mark.parametrize("offered", [True, False])
async def test_an_idn_domain_goes_out_as_a_labels(
    sim: Simulator, provider: SmtpProvider, offered: bool
) -> None:
    with_smtputf8(sim, offered)
    await provider.send(make_message("ana@bücher.example"))

    [payload] = received(sim)
    assert payload["rcpt_tos"] == ["ana@xn--bcher-kva.example"]
    assert payload["smtputf8"] is False
    assert "\r\nTo: ana@xn--bcher-kva.example\r\n" in payload["raw"]
    assert payload["raw"].isascii()


async def test_a_non_ascii_local_part_goes_out_with_smtputf8(
    sim: Simulator, provider: SmtpProvider
) -> None:
    content = Content(subject="Olá, Zoë", text="Obrigado.\n")
    await provider.send(make_message("zoë@bücher.example", content=content))

    [payload] = received(sim)
    assert payload["rcpt_tos"] == ["zoë@xn--bcher-kva.example"]
    assert payload["smtputf8"] is True
    raw: str = payload["raw"]
    assert "\r\nTo: zoë@xn--bcher-kva.example\r\n" in raw  # UTF-8, no encoded word
    assert payload["headers"]["To"] == "zoë@xn--bcher-kva.example"
    parsed = email.message_from_string(raw, policy=email.policy.default)
    assert parsed["To"].addresses[0].addr_spec == "zoë@xn--bcher-kva.example"
    assert parsed["Subject"] == "Olá, Zoë"


async def test_a_non_ascii_sender_goes_out_with_smtputf8(sim: Simulator) -> None:
    adapter = SmtpProvider("smtp", account(sim, from_address="zoë@bücher.example"))
    try:
        result = await adapter.send(make_message())
    finally:
        await adapter.close()

    [payload] = received(sim)
    assert payload["mail_from"] == "zoë@xn--bcher-kva.example"
    assert payload["smtputf8"] is True
    assert payload["headers"]["From"] == "Tidings <zoë@xn--bcher-kva.example>"
    assert result.provider_msg_id is not None
    assert result.provider_msg_id.endswith("@xn--bcher-kva.example>")


async def test_without_smtputf8_a_non_ascii_local_part_fails_permanently(
    sim: Simulator, provider: SmtpProvider
) -> None:
    with_smtputf8(sim, False)
    with pytest.raises(PermanentError) as raised:
        await provider.send(make_message("zoë@example.com"))

    assert raised.value.reason == "smtputf8_unsupported"
    assert raised.value.effect is None  # the address is fine; this server cannot take it
    await provider.send(make_message("ada@example.com"))  # the session is still usable
    assert [p["rcpt_tos"] for p in received(sim)] == [["ada@example.com"]]
    assert provider.connections_opened == 1


UTF8_MESSAGE = b"From: a@example.com\r\nTo: zo\xc3\xab@example.com\r\nSubject: x\r\n\r\nHi\r\n"


@pytest.mark.parametrize("offered", [True, False])
async def test_the_simulator_checks_smtputf8(
    plain_sim: Simulator, client: aiosmtplib.SMTP, offered: bool
) -> None:
    with_smtputf8(plain_sim, offered)
    await client.ehlo()
    assert client.supports_extension("smtputf8") is offered

    unicode_from = b"FROM:<zo\xc3\xab@example.com>"
    assert (await command(client, b"MAIL", unicode_from)).startswith("553 5.6.7")
    assert (await command(client, b"MAIL", b"FROM:<a@example.com>")).startswith("250")
    assert (await command(client, b"RCPT", b"TO:<zo\xc3\xab@example.com>")).startswith("553 5.6.7")
    assert (await command(client, b"RCPT", b"TO:<b@example.com>")).startswith("250")
    with pytest.raises(aiosmtplib.SMTPDataError) as refused:
        await client.data(UTF8_MESSAGE)  # UTF-8 in a header, SMTPUTF8 not declared
    assert refused.value.code == 554

    reply = await command(client, b"MAIL", unicode_from, b"SMTPUTF8")
    if not offered:
        assert reply.startswith("555")
        assert received(plain_sim) == []
        return
    assert reply.startswith("250")
    assert (await command(client, b"RCPT", b"TO:<zo\xc3\xab@example.com>")).startswith("250")
    await client.data(UTF8_MESSAGE)
    [payload] = received(plain_sim)
    assert payload["rcpt_tos"] == ["zoë@example.com"] and payload["smtputf8"] is True


# Header encoding: encoded words of at most 75 characters (RFC 2047 §2).

ENCODED_WORD = re.compile(r"=\?[^?\s]+\?[bBqQ]\?[^?\s]*\?=")
LONG_SUBJECTS = [
    "Confirmação da sua encomenda n.º 12345: já está a caminho e chegará em breve à sua "
    "morada, obrigado por comprar na nossa loja — até à próxima!",
    "ご注文ありがとうございます。お客様のご注文は本日発送されました。到着まで今しばらく"
    "お待ちください。またのご利用を心よりお待ちしております。",
    "🎉🎉🎉 Big sale 🎉 " * 12,
    "a  b   é\tdouble  spaces   and ñ " * 6,
]


def header_block(raw: str) -> str:
    return raw.split("\r\n\r\n", 1)[0]


def assert_well_encoded(raw: str) -> None:
    head = header_block(raw)
    for word in ENCODED_WORD.findall(head):
        assert len(word) <= 75, word
    for line in raw.split("\r\n"):
        assert len(line.encode()) <= 998


def from_header(raw: str) -> str:
    """The From header's value, unfolded (RFC 5322 §2.2.3: the CRLFs removed)."""
    value = re.search(r"^From: (.*?)\r\n(?![ \t])", header_block(raw) + "\r\n", re.M | re.S)
    assert value is not None
    return value.group(1).replace("\r\n", "")


def rfc2047_display_name(raw: str) -> str:
    """The From display name, decoded as RFC 2047 §6.2 says (whitespace between two encoded
    words ignored). Python 3.11's parser keeps that whitespace in a display name
    (CPython gh-128110), so it cannot judge a name long enough for several words."""
    phrase = from_header(raw).rpartition("<")[0].strip()
    return str(email.header.make_header(email.header.decode_header(phrase)))


@pytest.mark.parametrize("subject", LONG_SUBJECTS)
async def test_long_subjects_are_split_into_short_encoded_words(
    sim: Simulator, provider: SmtpProvider, subject: str
) -> None:
    message = marketing()
    message.content = Content(subject=subject, text="Hello\n")
    await provider.send(message)

    [payload] = received(sim)
    raw: str = payload["raw"]
    assert_well_encoded(raw)
    assert len(ENCODED_WORD.findall(header_block(raw))) > 1
    parsed = email.message_from_bytes(raw.encode(), policy=email.policy.default)
    assert parsed["Subject"] == subject
    assert f"\r\nList-Unsubscribe: {UNSUBSCRIBE}\r\n" in raw  # still whole, byte for byte
    assert f"\r\nList-Unsubscribe-Post: {ONE_CLICK}\r\n" in raw


async def test_an_ascii_subject_keeps_its_form(sim: Simulator, provider: SmtpProvider) -> None:
    subject = "Your order " + "is on its way " * 12
    await provider.send(make_message(content=Content(subject=subject, text="Hi\n")))
    assert f"\r\nSubject: {subject}\r\n" in received(sim)[0]["raw"]  # not folded below 998


SUBJECT_TEXT = st.text(
    st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")), min_size=1, max_size=300
).filter(lambda text: not text.isascii())


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(subject=SUBJECT_TEXT)
async def test_any_subject_decodes_back_to_itself(
    sim: Simulator, provider: SmtpProvider, subject: str
) -> None:
    await provider.send(make_message(content=Content(subject=subject, text="Hi\n")))

    raw: str = received(sim)[-1]["raw"]
    assert_well_encoded(raw)
    parsed = email.message_from_bytes(raw.encode(), policy=email.policy.default)
    assert parsed["Subject"] == subject


@pytest.mark.parametrize(
    "name",
    [
        "Zoë",
        "Loja Conceição — Atendimento ao Cliente e Encomendas Especiais, Lda.",
        "東京 渋谷" * 12,
    ],
)
async def test_a_non_ascii_from_name_is_encoded_in_short_words(sim: Simulator, name: str) -> None:
    adapter = SmtpProvider("smtp", account(sim, from_name=name))
    try:
        await adapter.send(make_message())
    finally:
        await adapter.close()

    raw: str = received(sim)[0]["raw"]
    assert_well_encoded(raw)
    assert rfc2047_display_name(raw) == name
    parsed = email.message_from_bytes(raw.encode(), policy=email.policy.default)
    assert parsed["From"].addresses[0].addr_spec == "noreply@tidings.example.com"
    if len(ENCODED_WORD.findall(from_header(raw))) == 1:  # also right for Python's parser
        assert parsed["From"].addresses[0].display_name == name


# Email details: the type's sender, reply-to, copies; DKIM; a reply that never came.


async def test_copies_go_in_the_envelope_and_only_cc_in_the_headers(
    sim: Simulator, provider: SmtpProvider
) -> None:
    message = make_message(
        sender=EmailSender("billing@shop.example", "Shop Billing"),
        reply_to="help@shop.example",
        cc=("boss@example.com", "ADA@example.com"),
        bcc=("archive@shop.example", "boss@example.com"),
    )
    await provider.send(message)

    payload = received(sim)[0]  # recorded once per recipient
    assert len(received(sim)) == 3
    parsed = email.message_from_string(payload["raw"], policy=email.policy.default)
    assert parsed["From"] == "Shop Billing <billing@shop.example>"
    assert parsed["Reply-To"] == "help@shop.example"
    assert parsed["Cc"] == "boss@example.com, ADA@example.com"
    assert "Bcc" not in parsed and "archive@shop.example" not in payload["raw"]
    # The recipient once, each copy once; bounces still go to the account's address.
    assert payload["rcpt_tos"] == ["ada@example.com", "boss@example.com", "archive@shop.example"]
    assert payload["mail_from"] == "noreply@tidings.example.com"


async def test_a_refused_copy_does_not_fail_the_delivery(
    sim: Simulator, provider: SmtpProvider
) -> None:
    sim.state("smtp").script("gone@example.com", "5.1.1")
    await provider.send(make_message(cc=("gone@example.com",)))
    [payload] = received(sim)
    assert payload["rcpt_tos"] == ["ada@example.com"]


def _dkim_key(tmp_path: Path) -> tuple[Path, bytes]:
    """A fresh RSA key (PEM file) and the DNS TXT record that publishes it."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    path = tmp_path / "dkim.pem"
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return path, b"v=DKIM1; k=rsa; p=" + base64.b64encode(public)


async def test_dkim_signs_what_receivers_check(sim: Simulator, tmp_path: Path) -> None:
    import dkim

    key_file, record = _dkim_key(tmp_path)
    signed = SmtpProvider(
        "smtp-dkim",
        account(
            sim,
            dkim_domain="tidings.example.com",
            dkim_selector="s2026",
            dkim_private_key_file=key_file,
        ),
    )
    try:
        await signed.send(marketing())
    finally:
        await signed.close()

    [payload] = received(sim)
    raw = payload["raw"].encode()
    looked_up: list[bytes] = []

    def dns(name: bytes, timeout: int = 5) -> bytes:
        looked_up.append(name)
        return record

    assert dkim.verify(raw, dnsfunc=dns)
    assert looked_up == [b"s2026._domainkey.tidings.example.com."]
    signature = raw.split(b"\r\n\r\n", 1)[0].split(b"DKIM-Signature:", 1)[1]
    tags = b"".join(signature.split())
    assert b"list-unsubscribe:list-unsubscribe-post" in tags.lower()  # RFC 8058: signed
    assert not dkim.verify(raw.replace(b"Subject: News", b"Subject: Newz"), dnsfunc=dns)


def test_dkim_settings_are_all_or_nothing(sim: Simulator, tmp_path: Path) -> None:
    key_file, _ = _dkim_key(tmp_path)
    with pytest.raises(ValueError, match="DKIM needs"):
        account(sim, dkim_domain="tidings.example.com", dkim_private_key_file=key_file)
    with pytest.raises(ValueError, match="DKIM needs"):
        account(
            sim,
            dkim_domain="tidings.example.com",
            dkim_selector="s1",
            dkim_private_key_file=key_file,
            dkim_private_key=SecretStr("x"),
        )
    with pytest.raises(ValueError):
        account(
            sim,
            dkim_domain="tidings.example.com",
            dkim_selector="s1",
            dkim_private_key=SecretStr("not a key"),
        )


async def test_no_reply_to_the_end_of_data_is_ambiguous_and_not_sent_again(
    sim: Simulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server has the message and its reply did not come: sending it again on a fresh
    session (as after a disconnect before DATA) could deliver it twice."""
    slow = slow_data(sim, monkeypatch)
    impatient = SmtpProvider("smtp-impatient", account(sim, timeout=0.5))
    try:
        slow.set()
        with pytest.raises(TransientError) as raised:
            await impatient.send(make_message("late@example.com"))
        opened = impatient.connections_opened
    finally:
        await impatient.close()
    assert raised.value.ambiguous and raised.value.reason == "no_answer"
    assert opened == 1  # not tried again on a fresh session
    await asyncio.sleep(2.0)  # the slow reply would have come by now
    assert len(received(sim)) <= 1
