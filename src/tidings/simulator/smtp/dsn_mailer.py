"""Mailing delivery status notifications: what the simulated SMTP server sends back, later,
about the messages it accepted, as a real mail server does.

For each recipient of an accepted message the behaviour's ``reports`` decide the outcome
(``ProviderState.report_outcome``; the rest is delivered, with no report). A bounce or delay
becomes a DSN (``simulator/dsn.py``) mailed, after ``report_delay_ms``, to the message's
envelope sender through ``smtp_dsn_relay``: from the null sender ``<>`` (RFC 5321 §4.5.5: a
report is never reported on), with STARTTLS when offered and certificates unchecked, as
servers deliver to an MX. A message whose sender is ``<>`` gets none. A send that fails or
is deferred (4yz) is tried again, waits doubling, a few times in all (a real server tries
for days); then, or at once after a 5yz, it is dropped and counted (``reportsFailed``), as
the HTTP reports are (``simulator/reports.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import Sequence
from datetime import UTC, datetime

import aiosmtplib

from tidings.simulator.behaviour import ProviderState
from tidings.simulator.smtp.dsn import build_dsn, outcome_for

log = logging.getLogger(__name__)
ATTEMPTS = 6  # 0.2 + 0.4 + ... + 3.2 s of waits
PARALLEL = 16  # sessions at once
RETRY_SECONDS = 0.2
TIMEOUT = 10.0


class DsnMailer:
    def __init__(self, state: ProviderState, relay: str, reporting_mta: str) -> None:
        host, _, port = relay.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"smtp_dsn_relay must be host:port, not {relay!r}")
        self.state = state
        self.host = host.removeprefix("[").removesuffix("]")
        self.port = int(port)
        self.reporting_mta = reporting_mta
        self._slots = asyncio.Semaphore(PARALLEL)
        self._tasks: set[asyncio.Task[None]] = set()

    def accepted(self, sender: str, recipients: Sequence[str], original: bytes) -> None:
        """A message was accepted: decide each recipient's outcome, mail the reports due."""
        if sender in ("", "<>"):
            return
        arrived = datetime.now(UTC)
        for recipient in recipients:
            outcome = outcome_for(self.state.report_outcome(recipient))
            if outcome is None:
                continue
            report = build_dsn(
                reporting_mta=self.reporting_mta,
                queue_id=secrets.token_hex(5).upper(),
                sender=sender,
                recipient=recipient,
                outcome=outcome,
                original=original,
                arrived=arrived,
                now=datetime.now(UTC),
            )
            self._schedule(sender, report)

    async def close(self) -> None:
        tasks, self._tasks = list(self._tasks), set()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _schedule(self, to: str, report: bytes) -> None:
        self.state.counts["reports_scheduled"] += 1
        task = asyncio.create_task(self._mail(to, report))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _mail(self, to: str, report: bytes) -> None:
        await asyncio.sleep(self.state.behaviour.report_delay_ms / 1000)
        async with self._slots:
            for attempt in range(ATTEMPTS):
                try:
                    await self._send(to, report)
                except aiosmtplib.SMTPResponseException as error:
                    self._warn("DSN to %s refused: %s %s", to, error.code, error.message)
                    if error.code >= 500:
                        break  # refused for good: a server does not try again either
                except (aiosmtplib.SMTPException, OSError) as error:
                    self._warn("DSN to %s not sent: %r", to, error)
                else:
                    self.state.counts["reports_posted"] += 1
                    return
                if attempt + 1 < ATTEMPTS:
                    await asyncio.sleep(RETRY_SECONDS * 2**attempt)
        self.state.counts["reports_failed"] += 1

    async def _send(self, to: str, report: bytes) -> None:
        # RFC 6531: a report returning internationalised mail is itself 8-bit UTF-8.
        options = [] if report.isascii() else ["SMTPUTF8", "BODY=8BITMIME"]
        client = aiosmtplib.SMTP(
            hostname=self.host,
            port=self.port,
            local_hostname=self.reporting_mta,
            start_tls=None,
            validate_certs=False,
            timeout=TIMEOUT,
        )
        async with client:  # not aiosmtplib.send, which refuses the null sender
            await client.sendmail("", [to], report, mail_options=options)

    def _warn(self, text: str, *args: object) -> None:
        """The first failure is a warning (nothing listening?), the rest are counted."""
        level = logging.DEBUG if self.state.counts["reports_warned"] else logging.WARNING
        self.state.counts["reports_warned"] += 1
        log.log(level, text, *args)
