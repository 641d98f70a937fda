"""A delivery status notification (DSN, RFC 3464) as a mail server writes one: what the
simulated SMTP server mails back to a message's envelope sender when, after accepting it, it
could not deliver it (or not yet).

Shaped after Postfix's bounces and delay warnings: ``multipart/report;
report-type=delivery-status`` with a part for people, the ``message/delivery-status`` part
(Reporting-MTA, Arrival-Date; for the recipient Final-Recipient, Original-Recipient, Action,
Status, Remote-MTA, Diagnostic-Code) and the original: the whole message
(``message/rfc822``) after a failure, its headers (``text/rfc822-headers``) with a delay
warning. A message sent with SMTPUTF8 gets the RFC 6533 types (``message/global-…``).
"""

from __future__ import annotations

import email.utils
import re
from dataclasses import dataclass
from datetime import datetime

_ENHANCED = re.compile(r"([45])\.\d{1,3}\.\d{1,3}")
_REMOTE_IP = "192.0.2.25"  # TEST-NET-1 (RFC 5737): the recipient's MX, as reported


@dataclass(frozen=True)
class Outcome:
    """What became of the message for one recipient, as the DSN reports it."""

    action: str  # failed or delayed
    status: str  # the enhanced status code
    diagnostic: str  # Diagnostic-Code, "{address}" and "{mx}" filled in


# Report names (a behaviour's ``reports``) -> what the DSN says; Postfix's wording.
OUTCOMES: dict[str, Outcome] = {
    "bounce": Outcome(
        "failed",
        "5.1.1",
        "smtp; 550 5.1.1 <{address}>: Recipient address rejected: User unknown in virtual "
        "mailbox table",
    ),
    "blocked": Outcome(
        "failed", "5.7.1", "smtp; 550 5.7.1 <{address}>: Message rejected due to local policy"
    ),
    "mailbox_full": Outcome("failed", "5.2.2", "smtp; 552 5.2.2 <{address}>: Mailbox full"),
    "delayed": Outcome(
        "delayed", "4.4.1", f"X-Postfix; connect to {{mx}}[{_REMOTE_IP}]:25: Connection timed out"
    ),
}


def outcome_for(name: str) -> Outcome | None:
    """A report name's outcome: one of ``OUTCOMES``, or any ``5.y.z`` (failed) or ``4.y.z``
    (delayed) code; None for "delivered" and names no DSN is sent for."""
    if name in OUTCOMES:
        return OUTCOMES[name]
    match = _ENHANCED.fullmatch(name)
    if match is None:
        return None
    failed = match.group(1) == "5"
    reply = f"smtp; {550 if failed else 451} {name} <{{address}}>: Simulated error {name}"
    return Outcome("failed" if failed else "delayed", name, reply)


def build_dsn(
    *,
    reporting_mta: str,
    queue_id: str,
    sender: str,
    recipient: str,
    outcome: Outcome,
    original: bytes,
    arrived: datetime,
    now: datetime,
) -> bytes:
    """The DSN's bytes (CRLF lines), mailed to ``sender`` about ``recipient``."""
    utf8 = not original.isascii()
    boundary = f"{queue_id}.{int(now.timestamp())}/{reporting_mta}"
    mx = f"mx.{recipient.rpartition('@')[2]}"
    diagnostic = outcome.diagnostic.format(address=recipient, mx=mx)
    header = _header(reporting_mta, queue_id, sender, boundary, outcome, now)
    parts = [
        _notice(reporting_mta, recipient, outcome, diagnostic),
        _status(reporting_mta, queue_id, sender, recipient, outcome, diagnostic, arrived, utf8),
        _returned(original, whole=outcome.action == "failed", utf8=utf8),
    ]
    lines = [*header, "", "This is a MIME-encapsulated message.", ""]
    for part in parts:
        lines += [f"--{boundary}", *part]
    text = "\r\n".join([*lines, f"--{boundary}--", ""])
    return text.encode("utf-8", "surrogateescape")


def _header(
    reporting_mta: str, queue_id: str, sender: str, boundary: str, outcome: Outcome, now: datetime
) -> list[str]:
    subject = "Undelivered Mail Returned to Sender"
    if outcome.action != "failed":
        subject = "Delayed Mail (still being retried)"
    stamp = now.strftime("%Y%m%d%H%M%S")
    return [
        f"From: MAILER-DAEMON@{reporting_mta} (Mail Delivery System)",
        f"Subject: {subject}",
        f"To: {sender}",
        "Auto-Submitted: auto-replied",
        "MIME-Version: 1.0",
        "Content-Type: multipart/report; report-type=delivery-status;",
        f'\tboundary="{boundary}"',
        "Content-Transfer-Encoding: 8bit",
        f"Message-Id: <{stamp}.{queue_id}@{reporting_mta}>",
        f"Date: {email.utils.format_datetime(now)}",
    ]


def _notice(reporting_mta: str, recipient: str, outcome: Outcome, diagnostic: str) -> list[str]:
    if outcome.action == "failed":
        words = [
            "I'm sorry to have to inform you that your message could not",
            "be delivered to one or more recipients. It's attached below.",
        ]
    else:
        words = [
            "Your message could not be delivered for more than 4 hour(s).",
            "It will be retried until it is 5 day(s) old.",
        ]
    return [
        "Content-Description: Notification",
        "Content-Type: text/plain; charset=us-ascii",
        "",
        f"This is the mail system at host {reporting_mta}.",
        "",
        *words,
        "",
        "                   The mail system",
        "",
        f"<{recipient}>: {diagnostic.partition('; ')[2]}",
        "",
    ]


def _status(
    reporting_mta: str,
    queue_id: str,
    sender: str,
    recipient: str,
    outcome: Outcome,
    diagnostic: str,
    arrived: datetime,
    utf8: bool,
) -> list[str]:
    kind = "message/global-delivery-status" if utf8 else "message/delivery-status"
    address_type = "utf-8" if utf8 else "rfc822"
    remote = [f"Remote-MTA: dns; mx.{recipient.rpartition('@')[2]}"]
    return [
        "Content-Description: Delivery report",
        f"Content-Type: {kind}",
        "",
        f"Reporting-MTA: dns; {reporting_mta}",
        f"X-Postfix-Queue-ID: {queue_id}",
        f"X-Postfix-Sender: rfc822; {sender}",
        f"Arrival-Date: {email.utils.format_datetime(arrived)}",
        "",
        f"Final-Recipient: {address_type}; {recipient}",
        f"Original-Recipient: {address_type};{recipient}",
        f"Action: {outcome.action}",
        f"Status: {outcome.status}",
        *(remote if outcome.action == "failed" else []),
        f"Diagnostic-Code: {diagnostic}",
        "",
    ]


def _returned(original: bytes, *, whole: bool, utf8: bool) -> list[str]:
    text = original.decode("utf-8", "surrogateescape")
    if whole:
        kind = "message/global" if utf8 else "message/rfc822"
        body = text
    else:
        kind = "message/global-headers" if utf8 else "text/rfc822-headers"
        body = text.partition("\r\n\r\n")[0] + "\r\n"
    description = "Undelivered Message" if whole else "Undelivered Message Headers"
    return [
        f"Content-Description: {description}",
        f"Content-Type: {kind}",
        "Content-Transfer-Encoding: 8bit",
        "",
        *body.removesuffix("\r\n").split("\r\n"),
        "",
    ]
