"""The SMTP listener that receives bounces mailed after a send was accepted (aiosmtpd).

Mail servers mail their delivery status notifications to a message's envelope sender; with
an SMTP account's ``return_path`` that is ``bounces+<delivery id>@<domain>``, and the MX of
``domain`` (or a relay's bounce forwarding) delivers them here. Only addresses of ``domain``
are accepted (others: ``550 5.1.1``), messages over ``max_message_bytes`` are refused
(``552``, by aiosmtpd). Each message is read by ``tracking/dsn.py``, mapped by
``tracking/dsn_events.py`` and written by ``store/tracking.apply``; anything that is not a
DSN (an auto-reply, spam) or names no delivery of ours is accepted and dropped, counted.
Anyone can mail the listener, so a report moves only a delivery sent (or attempted) through
one of the SMTP accounts whose ``return_path`` is at its domain (``providers/smtp/adapter.py``,
``bounce_accounts``); one naming another delivery is dropped, counted as ignored.

A report that outruns the outcome of its send (the delivery still being sent, as when a
relay bounces at once) is answered ``451``: the sending server tries again later, when the
status can move. One bad message never stops the listener: an error of ours is logged and
the message dropped (a retry would fail the same way); only a database that cannot be
reached answers ``451`` too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import weakref
from collections import Counter
from collections.abc import Collection, Sequence

from aiosmtpd.smtp import SMTP, Envelope, Session

from tidings.clock import utcnow
from tidings.store import tracking, tracking_targets
from tidings.store.db_errors import unavailable
from tidings.store.engine import Database
from tidings.tracking import dsn
from tidings.tracking.bounce_settings import BounceSettings
from tidings.tracking.dsn_events import bounce_events

log = logging.getLogger(__name__)
# The provider name DSN events are deduplicated under (webhook_seen.provider).
PROVIDER = "smtp-dsn"
CHANNEL = "email"
ACCEPTED = "250 2.0.0 Ok"
TRY_LATER = "451 4.3.0 Temporary failure, try again later"
NOT_YET_SENT = "451 4.3.0 The message is still being sent here, try again later"
IDLE_TIMEOUT = 60.0  # seconds a silent client keeps its connection


class BounceHandler:
    """aiosmtpd hooks: recipients of our domain only; each message read and applied."""

    def __init__(self, domain: str, db: Database, accounts: Collection[str]) -> None:
        self.domain = domain
        self.db = db
        self.accounts = frozenset(accounts)  # the SMTP accounts whose bounces come here
        self.counts: Counter[str] = Counter()  # for the log lines, and tests

    async def handle_RCPT(
        self, server: SMTP, session: Session, envelope: Envelope, address: str, options: list[str]
    ) -> str:
        if _domain(address) != self.domain:
            self.counts["refused"] += 1
            return f"550 5.1.1 <{address}>: Recipient address rejected: not a bounce address"
        envelope.rcpt_tos.append(address)
        envelope.rcpt_options.extend(options)
        return "250 2.1.5 Ok"

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        self.counts["received"] += 1
        try:
            return await self.take(envelope.original_content or b"", envelope.rcpt_tos)
        except Exception as error:
            if unavailable(error):
                log.warning("bounce listener: database unavailable (%r): answered 451", error)
                return TRY_LATER
            self.counts["errors"] += 1
            # The error's type only: its text may quote the message (a traceback at DEBUG).
            log.error(
                "bounce listener: a message could not be applied (%s): dropped",
                type(error).__name__,
                exc_info=log.isEnabledFor(logging.DEBUG),
            )
        return ACCEPTED

    async def take(self, raw: bytes, mailed_to: Sequence[str]) -> str:
        """Apply the DSN in ``raw`` (anything else is counted and dropped); the reply."""
        # Parsing a large message takes milliseconds: off the loop the API shares.
        report = await asyncio.to_thread(dsn.parse, raw)
        if report is None:
            self.counts["not_dsn"] += 1
            log.info(
                "bounce listener: a message that is not a DSN, ignored (%d so far)",
                self.counts["not_dsn"],
            )
            return ACCEPTED
        now = utcnow()
        items = bounce_events(report, mailed_to, now)
        if not items:
            self.counts["unmatched"] += 1
            log.info("bounce listener: DSN %s names no delivery of ours", report.report_id)
            return ACCEPTED
        # Every item is about one delivery; nothing is recorded, so a retry is no duplicate.
        if await tracking_targets.in_progress(self.db, PROVIDER, CHANNEL, items[0].key):
            self.counts["too_early"] += 1
            return NOT_YET_SENT
        applied = await tracking.apply(self.db, PROVIDER, CHANNEL, items, now, self.accounts)
        self.counts.update(
            applied=applied.applied,
            duplicates=applied.duplicates,
            unmatched=applied.unmatched,
            ignored=applied.ignored,
        )
        log.info(
            "bounce listener: DSN %s: %d applied, %d duplicate, %d unmatched, %d ignored",
            report.report_id,
            applied.applied,
            applied.duplicates,
            applied.unmatched,
            applied.ignored,
        )
        return ACCEPTED


class BounceListener:
    """The SMTP server of ``[bounces]``, in the event loop of the process that runs it."""

    def __init__(self, settings: BounceSettings, db: Database, accounts: Collection[str]) -> None:
        self.settings = settings
        self.handler = BounceHandler(settings.domain, db, accounts)
        self.port = settings.port  # the bound one once started (a setting of 0: any free)
        self._server: asyncio.Server | None = None
        self._connections: weakref.WeakSet[SMTP] = weakref.WeakSet()

    async def run(self, stop: asyncio.Event) -> None:
        """Listen until ``stop`` is set."""
        await self.start()
        try:
            await stop.wait()
        finally:
            await self.stop()

    async def start(self) -> None:
        self._server = await asyncio.get_running_loop().create_server(
            self._protocol,
            self.settings.host,
            self.settings.port,
            # Several API processes on one machine share the port (Linux, BSD).
            reuse_port=hasattr(socket, "SO_REUSEPORT"),
        )
        self.port = int(self._server.sockets[0].getsockname()[1])
        log.info(
            "bounce listener on %s:%d for @%s", self.settings.host, self.port, self.settings.domain
        )

    async def stop(self) -> None:
        if self._server is None:
            return
        self._server.close()
        for protocol in list(self._connections):
            if protocol.transport is not None:
                protocol.transport.close()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._server.wait_closed(), timeout=5)
        self._server = None

    def _protocol(self) -> SMTP:
        protocol = SMTP(
            self.handler,
            hostname=self.settings.domain,
            ident="tidings bounce listener",
            data_size_limit=self.settings.max_message_bytes,
            enable_SMTPUTF8=True,  # reports about internationalised mail (RFC 6533)
            timeout=IDLE_TIMEOUT,
            loop=asyncio.get_running_loop(),
        )
        self._connections.add(protocol)
        return protocol


def _domain(address: str) -> str:
    domain = address.rpartition("@")[2].strip().rstrip(".").lower()
    if domain.isascii():
        return domain
    try:
        return domain.encode("idna").decode("ascii")
    except UnicodeError:
        return domain
