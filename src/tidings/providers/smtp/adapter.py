"""The SMTP adapter (aiosmtplib): submission with STARTTLS or implicit TLS and AUTH.

Connections are reused: a small pool of open SMTP sessions, at most
``min(max_connections, max_in_flight)`` of them, each carrying one transaction at a time.
A session the server closed (idle timeout, 421) is dropped and replaced; a send that finds
its reused session already dead is retried once on a fresh one, which is safe because the
server had not accepted the message.

A session goes back to the pool only in a known state: after a clean transaction, or after
a refusal (or a local error) once RSET has ended the transaction. A send cancelled (the
dispatcher's timeout), timed out or cut off mid-transaction closes its session: the server
may still be answering a command the client gave up on.

Internationalised addresses: domains go out as IDNA A-labels; a non-ASCII local part needs
the server's SMTPUTF8 (RFC 6531), else the send fails permanently (``smtputf8_unsupported``).
"""

from __future__ import annotations

import asyncio
import ssl
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import aiosmtplib
from email_validator import EmailNotValidError, validate_email
from pydantic import Field, SecretStr, field_validator, model_validator

from tidings.providers.accounts import AccountSettings
from tidings.providers.base import (
    Message,
    PermanentError,
    PoisonError,
    ProviderError,
    SendResult,
    TransientError,
)
from tidings.providers.mime import as_bytes, build_email, wire_address, wire_domain
from tidings.providers.smtp.dkim import DkimSigner, check_dkim_settings
from tidings.providers.smtp.errors import AUTH_RETRY_AFTER, classify_reply

# In ``return_path``, the place of the delivery id (VERP: a bounce names its delivery).
VERP_FIELD = "{delivery}"


def bounce_accounts(accounts: Mapping[str, object], domain: str) -> frozenset[str]:
    """The SMTP accounts whose bounces the listener for ``domain`` receives: those whose
    ``return_path`` is at that domain. A report mailed there may move only their deliveries
    (anyone can mail the listener: the report's delivery id alone proves nothing)."""
    return frozenset(
        name
        for name, account in accounts.items()
        if isinstance(account, SmtpAccount)
        and account.return_path is not None
        and _at(account.return_path) == domain.lower()
    )


def _at(address: str) -> str:
    return wire_domain(address.rpartition("@")[2].strip().rstrip(".")).lower()


class SmtpAccount(AccountSettings):
    kind: Literal["smtp"] = "smtp"
    host: str
    port: int = Field(default=587, ge=1, le=65535)
    # starttls: upgrade after EHLO (port 587); implicit: TLS from the start (465).
    tls: Literal["starttls", "implicit", "none"] = "starttls"
    username: str | None = None
    password: SecretStr | None = None
    from_address: str
    from_name: str | None = None
    # A PEM file of certificates to trust (a private CA, the simulator's self-signed cert).
    ca_file: Path | None = None
    validate_certs: bool = True
    # The domain of generated Message-IDs; default: the domain of from_address.
    message_id_domain: str | None = None
    # Open sessions kept at most (mail servers limit connections per client).
    max_connections: int = Field(default=4, ge=1, le=100)
    # DKIM (RFC 6376): sign with this key for d=dkim_domain, s=dkim_selector; the public key
    # is published at <selector>._domainkey.<domain>. Unset: not signed (the relay may sign).
    dkim_domain: str | None = None
    dkim_selector: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
    dkim_private_key: SecretStr | None = None
    dkim_private_key_file: Path | None = None
    # The envelope sender (MAIL FROM), where bounces go: "bounces+{delivery}@bounces.example.com"
    # names the delivery in each (VERP). Unset: from_address. The From header is unchanged.
    return_path: str | None = None

    @model_validator(mode="after")
    def _dkim_complete(self) -> SmtpAccount:
        check_dkim_settings(self)
        return self

    # An internationalised domain must have an IDNA form: checked when the account loads.
    @field_validator("from_address")
    @classmethod
    def _sender_has_a_labels(cls, value: str) -> str:
        wire_address(value)
        return value

    @field_validator("return_path")
    @classmethod
    def _return_path_names_the_delivery(cls, value: str | None) -> str | None:
        if value is None:
            return value
        local, _, _ = value.rpartition("@")
        if value.count(VERP_FIELD) != 1 or VERP_FIELD not in local:
            raise ValueError(
                f"return_path must hold {VERP_FIELD} once, in its local part "
                f"(bounces+{VERP_FIELD}@bounces.example.com)"
            )
        try:
            sample = value.replace(VERP_FIELD, str(uuid.UUID(int=0)))
            # Syntax only (strict: a local part of at most 64 characters, as RFC 5321 says);
            # the domain may be one only a relay's bounce forwarding knows, or .test.
            validate_email(
                sample,
                check_deliverability=False,
                globally_deliverable=False,
                test_environment=True,
                strict=True,
            )
        except EmailNotValidError as error:
            raise ValueError(f"return_path is not a valid address: {error}") from error
        wire_address(value)
        return value

    @field_validator("message_id_domain")
    @classmethod
    def _domain_has_a_labels(cls, value: str | None) -> str | None:
        if value is not None:
            wire_domain(value)
        return value


@dataclass(frozen=True, slots=True)
class _Envelope:
    sender: str  # wire addresses: A-label domains
    recipient: str
    raw: bytes
    smtputf8: bool  # a local part is not ASCII
    copies: tuple[str, ...] = ()  # cc and bcc, without the recipient or repeats


class SmtpProvider:
    def __init__(self, name: str, account: SmtpAccount) -> None:
        self.name = name
        self.account = account
        self._idle: list[aiosmtplib.SMTP] = []
        self._slots = asyncio.Semaphore(min(account.max_connections, account.max_in_flight))
        self._tls_context: ssl.SSLContext | None = None
        self.connections_opened = 0  # for tests and metrics: reuse means few of these
        self._closed = False
        self._dkim = DkimSigner.of(account)
        self._return_path = wire_address(account.return_path) if account.return_path else None

    async def send(self, message: Message) -> SendResult:
        envelope, message_id = self._render(message)
        async with self._slots:
            await self._transaction(envelope)
        return SendResult(provider=self.name, provider_msg_id=message_id)

    async def close(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        for client in idle:
            try:
                await client.quit(timeout=self.account.timeout)
            except (aiosmtplib.SMTPException, OSError):
                client.close()

    def _render(self, message: Message) -> tuple[_Envelope, str]:
        account = self.account
        # The envelope sender, where bounces come back, stays the account's when the From
        # header is a type's own: its return_path (VERP), else from_address; checked when the
        # account was loaded.
        sender = wire_address(account.from_address)
        return_path = sender
        if self._return_path is not None:
            return_path = self._return_path.replace(VERP_FIELD, str(message.delivery_id))
        try:
            recipient = wire_address(message.address)
            copies = _copies(recipient, message)
        except ValueError as error:  # a domain without an IDNA form
            raise PermanentError(f"unusable address: {error}", reason="bad_address") from error
        domain = wire_domain(account.message_id_domain or sender.rpartition("@")[2])
        smtputf8 = not "".join((return_path, sender, recipient, *copies)).isascii()
        try:
            mail, message_id = build_email(
                message,
                sender=sender,
                recipient=recipient,
                from_name=account.from_name,
                message_id_domain=domain or "localhost",
            )
            raw = as_bytes(mail, smtputf8=smtputf8)
            if self._dkim is not None:
                raw = self._dkim.sign(raw)
        except (ValueError, TypeError) as error:
            raise PoisonError(f"cannot build the email: {error}", reason="bad_message") from error
        return _Envelope(return_path, recipient, raw, smtputf8, copies), message_id

    async def _transaction(self, envelope: _Envelope) -> None:
        try:
            await self._attempt(envelope)
        except ProviderError:
            raise
        except aiosmtplib.SMTPException as error:
            raise _classify(error) from error
        except (OSError, TimeoutError) as error:
            raise TransientError(f"SMTP connection failed: {error!r}") from error
        except ValueError as error:  # an address aiosmtplib refuses to put on the wire
            raise PermanentError(f"unusable address: {error}", reason="bad_address") from error

    async def _attempt(self, envelope: _Envelope) -> None:
        client, reused = await self._checkout()
        try:
            await self._use(client, envelope)
        except aiosmtplib.SMTPServerDisconnected:
            if not reused:
                raise
            client, _ = await self._checkout(fresh=True)
            await self._use(client, envelope)

    async def _use(self, client: aiosmtplib.SMTP, envelope: _Envelope) -> None:
        """One transaction on ``client``, which then goes back to the pool or is closed."""
        try:
            await self._sendmail(client, envelope)
        except (aiosmtplib.SMTPResponseException, ProviderError, ValueError):
            # The server answered each command sent (or none was sent): RSET ends the
            # transaction it may have begun, else the next MAIL would be "nested".
            await self._reset(client)
            raise
        except BaseException:
            # Cancelled, timed out or cut off: the server may still owe a reply, which the
            # next command would take for its own. No I/O here, just close.
            client.close()
            raise
        self._checkin(client)

    async def _sendmail(self, client: aiosmtplib.SMTP, envelope: _Envelope) -> None:
        options = self._mail_options(client, envelope)
        encoding = "utf-8" if envelope.smtputf8 else "ascii"
        await client.mail(envelope.sender, options=options, encoding=encoding)
        await client.rcpt(envelope.recipient, encoding=encoding)
        for copy in envelope.copies:
            try:
                await client.rcpt(copy, encoding=encoding)
            except aiosmtplib.SMTPRecipientRefused:
                pass  # a refused copy: the delivery is to the recipient, who was accepted
        try:
            await client.data(envelope.raw)
        except (aiosmtplib.SMTPServerDisconnected, aiosmtplib.SMTPTimeoutError) as error:
            # The message went out; whether the server took it, no reply said.
            raise TransientError(
                f"SMTP: no reply to the end of DATA ({type(error).__name__}): perhaps sent",
                reason="no_answer",
                ambiguous=True,
            ) from error

    def _mail_options(self, client: aiosmtplib.SMTP, envelope: _Envelope) -> list[str]:
        """MAIL parameters: SIZE when offered (RFC 1870); SMTPUTF8 when an address needs it."""
        options = [f"SIZE={len(envelope.raw)}"] if client.supports_extension("size") else []
        if envelope.smtputf8:
            if not client.supports_extension("smtputf8"):
                raise PermanentError(
                    f"the SMTP server does not offer SMTPUTF8, which {envelope.recipient!r} "
                    "needs (a non-ASCII local part)",
                    reason="smtputf8_unsupported",
                )
            options.append("SMTPUTF8")
            if client.supports_extension("8bitmime"):  # the UTF-8 header octets are 8-bit
                options.append("BODY=8BITMIME")
        return options

    async def _reset(self, client: aiosmtplib.SMTP) -> None:
        """RSET, within the client's timeout; back to the pool if it worked, else closed."""
        reset = False
        try:
            if client.is_connected:  # a 421 closed it already
                await client.rset()
                reset = True
        except (aiosmtplib.SMTPException, OSError):
            pass  # the send's own error is the one to report
        finally:
            if reset:
                self._checkin(client)
            else:
                client.close()  # also when cancelled during the RSET

    async def _checkout(self, fresh: bool = False) -> tuple[aiosmtplib.SMTP, bool]:
        while self._idle and not fresh:
            client = self._idle.pop()
            if client.is_connected:
                return client, True
        return await self._connect(), False

    def _checkin(self, client: aiosmtplib.SMTP) -> None:
        if self._closed:
            client.close()  # a send that finished after close(): keep nothing open
        elif client.is_connected:
            self._idle.append(client)

    async def _connect(self) -> aiosmtplib.SMTP:
        account = self.account
        password = account.password.get_secret_value() if account.password else None
        client = aiosmtplib.SMTP(
            hostname=account.host,
            port=account.port,
            username=account.username,
            password=password if account.username else None,
            timeout=account.timeout,
            use_tls=account.tls == "implicit",
            start_tls=account.tls == "starttls",
            validate_certs=account.validate_certs,
            tls_context=await self._context(),
        )
        try:
            await client.connect()
            if client.is_ehlo_or_helo_needed:  # extensions (SIZE, SMTPUTF8) before MAIL
                await _greet(client)
        except BaseException:
            client.close()
            raise
        self.connections_opened += 1
        return client

    async def _context(self) -> ssl.SSLContext | None:
        """A context trusting ``ca_file``; None lets aiosmtplib use the system store."""
        if self.account.ca_file is None or not self.account.validate_certs:
            return None
        if self._tls_context is None:
            self._tls_context = await asyncio.to_thread(
                ssl.create_default_context, cafile=str(self.account.ca_file)
            )
        return self._tls_context


def _copies(recipient: str, message: Message) -> tuple[str, ...]:
    """The cc and bcc addresses to add to the envelope, each once, never the recipient."""
    seen = {recipient.lower()}
    copies = []
    for address in (wire_address(a) for a in (*message.cc, *message.bcc)):
        if address.lower() not in seen:
            seen.add(address.lower())
            copies.append(address)
    return tuple(copies)


async def _greet(client: aiosmtplib.SMTP) -> None:
    try:
        await client.ehlo()
    except aiosmtplib.SMTPHeloError:
        await client.helo()  # an RFC 821 server: no extensions


def _classify(error: aiosmtplib.SMTPException) -> ProviderError:
    if isinstance(error, aiosmtplib.SMTPRecipientsRefused) and error.recipients:
        refused = error.recipients[0]
        return classify_reply(refused.code, refused.message, recipient=True)
    if isinstance(error, aiosmtplib.SMTPAuthenticationError):
        return TransientError(
            f"SMTP authentication failed: {error.code} {error.message}",
            retry_after=AUTH_RETRY_AFTER,
            reason="auth_failed",
        )
    if isinstance(error, aiosmtplib.SMTPResponseException):
        recipient = isinstance(error, aiosmtplib.SMTPRecipientRefused)
        return classify_reply(error.code, error.message, recipient=recipient)
    if isinstance(error, aiosmtplib.SMTPNotSupported):
        # The server lacks STARTTLS or AUTH: configuration, like a failed login.
        return TransientError(
            f"SMTP server: {error}", retry_after=AUTH_RETRY_AFTER, reason="unsupported"
        )
    return TransientError(f"SMTP error: {error!r}")
