"""The SMTP adapter against the simulator's aiosmtpd server, over real loopback sockets."""

from __future__ import annotations

import email
import email.policy
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from tests.messages import message
from tidings.priorities import Channel
from tidings.providers.base import Content, Message, PermanentError, PoisonError, TransientError
from tidings.providers.smtp import SmtpAccount, SmtpProvider
from tidings.providers.smtp_replies import classify_reply
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


async def test_a_repeated_delivery_is_counted_as_a_duplicate(
    sim: Simulator, provider: SmtpProvider
) -> None:
    message = make_message()
    await provider.send(message)
    await provider.send(message)

    summary = sim.state("smtp").summary()
    assert (summary["received"], summary["distinct"], summary["duplicates"]) == (2, 1, 1)


@pytest.mark.parametrize(
    ("error", "kind", "effect", "reason"),
    [
        ("5.1.1", PermanentError, Effect.SUPPRESS_ADDRESS, "hard_bounce"),
        ("5.2.2", TransientError, None, "mailbox_full"),
        ("4.2.2", TransientError, None, "mailbox_full"),
        ("4.x", TransientError, None, "smtp_451"),
        ("421", TransientError, None, "smtp_421"),
        ("5.7.1", PermanentError, None, "policy"),
        ("5.3.4", PoisonError, None, "message_too_large"),
        ("552", PoisonError, None, "message_too_large"),
        ("5.0.0", PermanentError, None, "smtp_554"),
    ],
)
async def test_classifies_each_reply(
    sim: Simulator,
    provider: SmtpProvider,
    error: str,
    kind: type[Exception],
    effect: Effect | None,
    reason: str,
) -> None:
    sim.state("smtp").script("ada@example.com", error)

    with pytest.raises(kind) as raised:
        await provider.send(make_message())

    assert type(raised.value) is kind
    assert raised.value.effect == effect  # type: ignore[attr-defined]
    assert raised.value.reason == reason  # type: ignore[attr-defined]
    assert received(sim) == []
    await provider.send(make_message())  # the session is usable (or replaced) afterwards
    assert len(received(sim)) == 1


async def test_outage_and_rate_limit_are_transient(sim: Simulator, provider: SmtpProvider) -> None:
    state = sim.state("smtp")
    state.behaviour = state.behaviour.model_copy(update={"down": True})
    with pytest.raises(TransientError, match=r"421 4\.3\.2"):
        await provider.send(make_message())

    state.behaviour = state.behaviour.model_copy(update={"down": False, "rate_limit": 1.0})
    await provider.send(make_message())
    with pytest.raises(TransientError, match=r"451 4\.7\.0"):
        await provider.send(make_message())


async def test_wrong_password_is_transient_and_suppresses_nothing(sim: Simulator) -> None:
    adapter = SmtpProvider("smtp", account(sim, password=SecretStr("wrong")))
    try:
        with pytest.raises(TransientError) as raised:
            await adapter.send(make_message())
    finally:
        await adapter.close()

    assert raised.value.reason == "auth_failed"
    assert raised.value.effect is None
    assert raised.value.retry_after is not None and raised.value.retry_after >= 60
    assert received(sim) == []


async def test_mail_without_login_is_refused_as_configuration(sim: Simulator) -> None:
    adapter = SmtpProvider("smtp", account(sim, username=None, password=None))
    try:
        with pytest.raises(TransientError) as raised:
            await adapter.send(make_message())
    finally:
        await adapter.close()

    assert raised.value.reason == "auth_failed"
    assert received(sim) == []


async def test_untrusted_certificate_fails_the_connection(sim: Simulator) -> None:
    adapter = SmtpProvider("smtp", account(sim, ca_file=None))
    try:
        with pytest.raises(TransientError):
            await adapter.send(make_message())
    finally:
        await adapter.close()
    assert received(sim) == []


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
    import asyncio

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
    ],
)
def test_reply_classification(
    code: int, text: str, recipient: bool, kind: type[Exception], effect: Effect | None
) -> None:
    error = classify_reply(code, text, recipient=recipient)
    assert type(error) is kind
    assert error.effect == effect
