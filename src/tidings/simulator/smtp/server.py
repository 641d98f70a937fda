"""A simulated SMTP submission server (aiosmtpd) on its own port.

TLS as configured (``smtp_tls``): STARTTLS required before AUTH and mail, implicit TLS from
the first byte, or none. AUTH PLAIN/LOGIN is checked against the configured username and
password. Admissions become the replies real servers send (Postfix wording): a bad mailbox
is refused at RCPT with ``550 5.1.1``, an outage with ``421``, a too-large message after
DATA with ``552 5.3.4``. Each accepted message is recorded with its raw bytes and headers;
a repeated ``X-Tidings-Delivery-Id`` is counted as a duplicate and answered with the first
queue id. With ``smtp_dsn_relay`` set, what the behaviour's ``reports`` bounce or delay is
reported later by mail, to the envelope sender (``simulator/dsn_mailer.py``).

Where aiosmtpd is laxer than a real server, it is made as strict: a second MAIL in one
transaction gets Postfix's ``503 5.5.1 Error: nested MAIL command``; SMTPUTF8 (RFC 6531) is
offered when the behaviour's ``smtputf8`` says so, and a non-ASCII address without the
SMTPUTF8 parameter gets ``553 5.6.7``, non-ASCII header bytes without it ``554 5.6.0``.
"""

from __future__ import annotations

import asyncio
import email
import email.policy
import hmac
import logging
import re
import secrets
import ssl
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiosmtpd.smtp import SMTP, AuthResult, Envelope, LoginPassword, Session, syntax

from tidings.simulator.behaviour import OK, OUTAGE, RATE_LIMITED, ErrorNames, ProviderState
from tidings.simulator.selfsigned import self_signed
from tidings.simulator.server import KNOWN_ERRORS, SERVERS
from tidings.simulator.smtp.dsn_mailer import DsnMailer

if TYPE_CHECKING:
    from tidings.simulator.server import Simulator

HOSTNAME = "smtp.simulator.tidings.test"
DELIVERY_HEADER = "X-Tidings-Delivery-Id"

# Error name -> (reply, phase). ``{address}`` is the recipient. Phase "data": answered after
# the message was sent (as servers do for size and content), else at RCPT.
REPLIES: dict[str, tuple[str, str]] = {
    "5.1.1": ("550 5.1.1 <{address}>: Recipient address rejected: User unknown", "rcpt"),
    "5.1.2": ("550 5.1.2 <{address}>: Recipient address rejected: Domain not found", "rcpt"),
    "5.2.2": ("552 5.2.2 <{address}>: Mailbox full", "rcpt"),
    "4.2.2": ("452 4.2.2 <{address}>: Mailbox full", "rcpt"),
    "4.x": ("451 4.3.0 <{address}>: Temporary lookup failure", "rcpt"),
    "4.3.0": ("451 4.3.0 <{address}>: Temporary lookup failure", "rcpt"),
    "421": ("421 4.3.2 Service not available, closing transmission channel", "rcpt"),
    "5.7.1": ("550 5.7.1 <{address}>: Message rejected due to local policy", "rcpt"),
    "5.3.4": ("552 5.3.4 Message size exceeds fixed limit", "data"),
    "552": ("552 Message size exceeds fixed maximum message size", "data"),
    "5.0.0": ("554 5.0.0 <{address}>: Transaction failed", "rcpt"),
}
OUTAGE_REPLY = "421 4.3.2 Service not available, closing transmission channel"
RATE_LIMITED_REPLY = "451 4.7.0 Too many messages, slow down"
NESTED_MAIL_REPLY = "503 5.5.1 Error: nested MAIL command"
UNICODE_ADDRESS_REPLY = "553 5.6.7 Must declare SMTPUTF8 to send unicode address"
NO_SMTPUTF8_REPLY = "555 5.5.4 Unsupported option: SMTPUTF8"
UNICODE_HEADER_REPLY = "554 5.6.0 Message header contains non-ASCII bytes without SMTPUTF8"
_ENHANCED = re.compile(r"([245])\.\d{1,3}\.\d{1,3}")


def _not_login_data_notice(record: logging.LogRecord) -> bool:
    """aiosmtpd warns about its own deprecated attribute on every AUTH; not ours to fix."""
    return "login_data is deprecated" not in record.getMessage()


logging.getLogger("mail.log").addFilter(_not_login_data_notice)


def reply_for(error: str, address: str) -> tuple[str, str]:
    """The SMTP reply (and phase) for an error name; an unknown ``x.y.z`` gets 451/550."""
    if error in REPLIES:
        text, phase = REPLIES[error]
        return text.format(address=address), phase
    match = _ENHANCED.fullmatch(error)
    code = {"4": 451, "5": 550}.get(match.group(1) if match else "4", 451)
    status = error if match else "4.0.0"
    return f"{code} {status} <{address}>: Simulated error {error}", "rcpt"


class SmtpHandler:
    """aiosmtpd hooks: authentication, admissions and recording."""

    def __init__(
        self,
        state: ProviderState,
        username: str | None,
        password: str,
        dsn: DsnMailer | None = None,
    ) -> None:
        self.state = state
        self.username = username
        self.password = password
        self.dsn = dsn  # None: no delivery status notifications
        self._pending: weakref.WeakKeyDictionary[Envelope, str] = weakref.WeakKeyDictionary()

    def authenticate(
        self, server: SMTP, session: Session, envelope: Envelope, mechanism: str, data: Any
    ) -> AuthResult:
        ok = (
            self.username is not None
            and isinstance(data, LoginPassword)
            and hmac.compare_digest(data.login, self.username.encode())
            and hmac.compare_digest(data.password, self.password.encode())
        )
        return AuthResult(success=ok, handled=False)

    async def handle_MAIL(
        self,
        server: SMTP,
        session: Session,
        envelope: Envelope,
        address: str,
        options: list[str],
    ) -> str:
        if self.username is not None and not session.authenticated:
            return "530 5.7.0 Authentication required"
        if envelope.smtp_utf8 and not (isinstance(server, StrictSMTP) and server.smtputf8):
            return NO_SMTPUTF8_REPLY
        if not address.isascii() and not envelope.smtp_utf8:
            return UNICODE_ADDRESS_REPLY
        envelope.mail_from = address
        envelope.mail_options.extend(options)
        return "250 2.1.0 Ok"

    async def handle_RCPT(
        self,
        server: SMTP,
        session: Session,
        envelope: Envelope,
        address: str,
        options: list[str],
    ) -> str:
        if not address.isascii() and not envelope.smtp_utf8:
            return UNICODE_ADDRESS_REPLY
        admission = await self.state.admit(address)
        if admission == OUTAGE:
            return _closing(server, OUTAGE_REPLY)
        if admission == RATE_LIMITED:
            return RATE_LIMITED_REPLY
        if admission != OK:
            reply, phase = reply_for(admission, address)
            if phase == "rcpt":
                return _closing(server, reply) if reply.startswith("421") else reply
            self._pending[envelope] = reply
        envelope.rcpt_tos.append(address)
        envelope.rcpt_options.extend(options)
        return "250 2.1.5 Ok"

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        pending = self._pending.pop(envelope, None)
        raw = envelope.original_content or b""
        if not envelope.smtp_utf8 and not raw.partition(b"\r\n\r\n")[0].isascii():
            return UNICODE_HEADER_REPLY  # RFC 6532 headers only in an SMTPUTF8 transaction
        if pending is not None:
            return pending
        # As text: the bytes parser would leave UTF-8 headers (RFC 6532) as surrogates.
        text = raw.decode("utf-8", errors="replace")
        parsed = email.message_from_string(text, policy=email.policy.default)
        delivery_id = parsed.get(DELIVERY_HEADER)
        repeated = self.state.first_answer(str(delivery_id)) if delivery_id else None
        queue_id = repeated or secrets.token_hex(5).upper()
        for index, address in enumerate(envelope.rcpt_tos):
            key = None if delivery_id is None else str(delivery_id)
            if key is not None and index > 0:
                key = f"{key}/{address}"  # one message to several recipients: one each
            self.state.record(address, key, _payload(server, envelope, text, parsed))
        if delivery_id is not None:
            self.state.answers.setdefault(str(delivery_id), queue_id)
        if self.dsn is not None and repeated is None:  # a deduplicated repeat: no new report
            self.dsn.accepted(envelope.mail_from or "", envelope.rcpt_tos, raw)
        return f"250 2.0.0 Ok: queued as {queue_id}"


class StrictSMTP(SMTP):
    """aiosmtpd, answering as Postfix where aiosmtpd is laxer (see the module's doc)."""

    def __init__(self, handler: SmtpHandler, **kwargs: Any) -> None:
        # Arguments are read as UTF-8 even when SMTPUTF8 is not offered, so that a non-ASCII
        # address gets 553 5.6.7 from the handler rather than "500 strict ASCII mode".
        super().__init__(handler, enable_SMTPUTF8=True, **kwargs)
        self.state = handler.state
        self.smtputf8 = True  # offered in this session's EHLO

    @syntax("EHLO hostname")
    async def smtp_EHLO(self, hostname: str) -> None:
        # aiosmtpd lists SMTPUTF8 while enable_SMTPUTF8 is set: unset it for this reply.
        self.smtputf8 = self.state.behaviour.smtputf8
        self.enable_SMTPUTF8 = self.smtputf8
        try:
            await super().smtp_EHLO(hostname)
        finally:
            self.enable_SMTPUTF8 = True

    @syntax("MAIL FROM: <address>", extended=" [SP <mail-parameters>]")
    async def smtp_MAIL(self, arg: str | None) -> None:
        if self.envelope is not None and self.envelope.mail_from:
            await self.push(NESTED_MAIL_REPLY)
            return
        await super().smtp_MAIL(arg)


def _closing(server: SMTP, reply: str) -> str:
    """A 421 reply: the server closes the connection once the reply is written."""
    transport = server.transport
    if transport is not None:
        asyncio.get_running_loop().call_soon(transport.close)
    return reply


def _payload(
    server: SMTP, envelope: Envelope, raw: str, parsed: email.message.Message
) -> dict[str, Any]:
    transport = server.transport
    peer = server.session.peer if server.session is not None else None
    return {
        # The client's address:port tells connections apart (reuse), ssl_object a TLS one.
        "peer": ":".join(map(str, peer)) if isinstance(peer, tuple) else str(peer),
        "tls": transport is not None and transport.get_extra_info("ssl_object") is not None,
        "mail_from": envelope.mail_from,
        "rcpt_tos": list(envelope.rcpt_tos),
        "smtputf8": envelope.smtp_utf8,
        "headers": {name: str(value) for name, value in parsed.items()},
        "raw": raw,
    }


class SmtpServer:
    """The listener: one aiosmtpd protocol per connection, in the simulator's event loop."""

    def __init__(self, sim: Simulator) -> None:
        config = sim.config
        self.state = sim.new_state("smtp")
        self.state.error_names = ERROR_NAMES
        self.host = config.host
        self.port = config.smtp_port
        self.tls = config.smtp_tls
        self.credentials_dir = config.credentials_dir
        relay = config.smtp_dsn_relay
        self.dsn = DsnMailer(self.state, relay, HOSTNAME) if relay else None
        self.handler = SmtpHandler(self.state, config.smtp_username, config.smtp_password, self.dsn)
        self.cert_file: Path | None = None  # trust this (ca_file) to validate the server
        self._server: asyncio.Server | None = None
        self._context: ssl.SSLContext | None = None
        self._connections: weakref.WeakSet[SMTP] = weakref.WeakSet()

    async def start(self) -> None:
        self._context = self._tls_context() if self.tls != "none" else None
        self._server = await asyncio.get_running_loop().create_server(
            self._protocol,
            self.host,
            self.port,
            ssl=self._context if self.tls == "implicit" else None,
        )
        self.port = int(self._server.sockets[0].getsockname()[1])

    def _tls_context(self) -> ssl.SSLContext:
        self.cert_file, key_file = self_signed(self.credentials_dir, "smtp", self.host)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.cert_file, key_file)
        return context

    def _protocol(self) -> SMTP:
        starttls = self.tls == "starttls"
        protocol = StrictSMTP(
            self.handler,
            hostname=HOSTNAME,
            tls_context=self._context if starttls else None,
            require_starttls=starttls,
            # With implicit TLS the transport is already encrypted (aiosmtpd only knows about
            # STARTTLS); with no TLS the simulator allows AUTH in the clear on loopback.
            auth_require_tls=starttls,
            authenticator=self.handler.authenticate,
            data_size_limit=None,
            loop=asyncio.get_running_loop(),
        )
        self._connections.add(protocol)
        return protocol

    async def stop(self) -> None:
        if self.dsn is not None:
            await self.dsn.close()
        if self._server is None:
            return
        self._server.close()
        for protocol in list(self._connections):
            if protocol.transport is not None:
                protocol.transport.close()
        await self._server.wait_closed()
        self._server = None


# The error names this provider answers as documented (the control API refuses others).
ERROR_NAMES = ErrorNames(
    frozenset(REPLIES), _ENHANCED.pattern, "any enhanced status code 4.y.z or 5.y.z"
)
KNOWN_ERRORS["smtp"] = ERROR_NAMES
SERVERS["smtp"] = SmtpServer
