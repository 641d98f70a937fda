"""The SMTP adapter (aiosmtplib): submission with STARTTLS or implicit TLS and AUTH.

Connections are reused: a small pool of open SMTP sessions, at most
``min(max_connections, max_in_flight)`` of them, each carrying one transaction at a time.
A session the server closed (idle timeout, 421) is dropped and replaced; a send that finds
its reused session already dead is retried once on a fresh one, which is safe because the
server had not accepted the message.
"""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path
from typing import Literal

import aiosmtplib
from pydantic import Field, SecretStr

from tidings.providers.accounts import AccountSettings
from tidings.providers.base import (
    Message,
    PermanentError,
    PoisonError,
    ProviderError,
    SendResult,
    TransientError,
)
from tidings.providers.mime import as_bytes, build_email
from tidings.providers.smtp_replies import AUTH_RETRY_AFTER, classify_reply


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


class SmtpProvider:
    def __init__(self, name: str, account: SmtpAccount) -> None:
        self.name = name
        self.account = account
        self._idle: list[aiosmtplib.SMTP] = []
        self._slots = asyncio.Semaphore(min(account.max_connections, account.max_in_flight))
        self._tls_context: ssl.SSLContext | None = None
        self.connections_opened = 0  # for tests and metrics: reuse means few of these
        self._closed = False

    async def send(self, message: Message) -> SendResult:
        raw, message_id = self._render(message)
        async with self._slots:
            await self._transaction(message.address, raw)
        return SendResult(provider=self.name, provider_msg_id=message_id)

    async def close(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        for client in idle:
            try:
                await client.quit(timeout=self.account.timeout)
            except (aiosmtplib.SMTPException, OSError):
                client.close()

    def _render(self, message: Message) -> tuple[bytes, str]:
        account = self.account
        domain = account.message_id_domain or account.from_address.rpartition("@")[2]
        try:
            mail, message_id = build_email(
                message,
                from_address=account.from_address,
                from_name=account.from_name,
                message_id_domain=domain or "localhost",
            )
            return as_bytes(mail), message_id
        except (ValueError, TypeError) as error:
            raise PoisonError(f"cannot build the email: {error}", reason="bad_message") from error

    async def _transaction(self, recipient: str, raw: bytes) -> None:
        try:
            await self._attempt(recipient, raw)
        except ProviderError:
            raise
        except aiosmtplib.SMTPException as error:
            raise _classify(error) from error
        except (OSError, TimeoutError) as error:
            raise TransientError(f"SMTP connection failed: {error!r}") from error

    async def _attempt(self, recipient: str, raw: bytes) -> None:
        client, reused = await self._checkout()
        try:
            await self._sendmail(client, recipient, raw)
        except aiosmtplib.SMTPServerDisconnected:
            client.close()
            if not reused:
                raise
            client, _ = await self._checkout(fresh=True)
            await self._sendmail(client, recipient, raw)
        finally:
            self._checkin(client)

    async def _sendmail(self, client: aiosmtplib.SMTP, recipient: str, raw: bytes) -> None:
        try:
            await client.sendmail(self.account.from_address, [recipient], raw)
        except ValueError as error:  # an address aiosmtplib refuses to put on the wire
            raise PermanentError(f"unusable address: {error}", reason="bad_address") from error

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
