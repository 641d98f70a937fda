"""Reading a delivery status notification (DSN, RFC 3464): pure parsing, no I/O.

A mail server that accepted a message and then could not deliver it (or not yet) mails a
report to the message's envelope sender: ``multipart/report; report-type=delivery-status``
holding a ``message/delivery-status`` part (a block of fields about the report, then a block
per recipient: ``Final-Recipient``, ``Action``, ``Status``, ``Diagnostic-Code``) and usually
the original message (``message/rfc822``) or its headers (``text/rfc822-headers``).

``parse`` keeps what tidings needs of it, or answers None for anything else (an auto-reply,
spam, an ARF complaint). It never raises: the bytes come from anyone who can reach the
listener, and the email package is lenient but not proof against every crafted input.
"""

from __future__ import annotations

import email
import email.policy
import email.utils
import hashlib
import re
from dataclasses import dataclass
from email.header import Header, decode_header
from email.message import Message
from email.parser import HeaderParser

# The header the SMTP adapter puts on every message (tidings.providers.mime, a layer above).
DELIVERY_HEADER = "X-Tidings-Delivery-Id"
_STATUS_TYPES = ("message/delivery-status", "message/global-delivery-status")  # RFC 6533
_ORIGINAL_TYPES = (
    "message/rfc822",
    "message/global",
    "text/rfc822-headers",
    "message/rfc822-headers",  # not registered, but sent
    "message/global-headers",
)
_STATUS_CODE = re.compile(r"(?<![\d.])([245])\.(\d{1,3})\.(\d{1,3})(?![\d.])")
_BLANK_LINE = re.compile(r"\r?\n[ \t]*\r?\n")
_MAX_RECIPIENTS = 100  # blocks read per report; real ones have a few
_MAX_TEXT = 500  # characters kept of a field (the history's detail)
# compat32: header values are plain strings, never parsed lazily into objects that may raise.
_POLICY = email.policy.compat32
_HEADERS = HeaderParser(policy=_POLICY)


@dataclass(frozen=True)
class RecipientStatus:
    """One per-recipient block of the report."""

    recipient: str | None  # Final-Recipient, the address alone
    original_recipient: str | None  # Original-Recipient (what the sender gave), if reported
    action: str  # failed, delayed, delivered, relayed, expanded (lower case)
    status: str | None  # the enhanced status code, "5.1.1"
    diagnostic: str | None  # Diagnostic-Code without its type: "550 5.1.1 User unknown"
    remote_mta: str | None


@dataclass(frozen=True)
class Original:
    """What the report returned of the message it is about (its headers)."""

    delivery_id: str | None = None  # its X-Tidings-Delivery-Id
    message_id: str | None = None
    to: tuple[str, ...] = ()  # lower case
    cc: tuple[str, ...] = ()


@dataclass(frozen=True)
class Dsn:
    report_id: str  # the report's Message-ID, else a digest of it: what a repeat shares
    reporting_mta: str | None
    recipients: tuple[RecipientStatus, ...]
    original: Original


def parse(raw: bytes) -> Dsn | None:
    """The delivery status notification in ``raw``, or None when it is not one."""
    try:
        return _parse(raw)
    except Exception:  # see the module's doc: a message we cannot read is not a DSN for us
        return None


def _parse(raw: bytes) -> Dsn | None:
    report = email.message_from_bytes(raw, policy=_POLICY)
    if report.get_content_type() != "multipart/report":
        return None
    report_type = report.get_param("report-type")
    if report_type is not None and _text(report_type).lower() != "delivery-status":
        return None  # a feedback report (ARF), a disposition notification (MDN)
    parts = [p for p in report.get_payload() if isinstance(p, Message)]
    status_part = next((p for p in parts if p.get_content_type() in _STATUS_TYPES), None)
    if status_part is None:
        return None
    blocks = _blocks(status_part)
    recipients = tuple(
        found for block in blocks[1 : 1 + _MAX_RECIPIENTS] if (found := _recipient(block))
    )
    if not recipients:
        return None
    original_part = next((p for p in parts if p.get_content_type() in _ORIGINAL_TYPES), None)
    return Dsn(
        report_id=_field(report, "Message-ID") or "sha256:" + hashlib.sha256(raw).hexdigest(),
        reporting_mta=_typed(_field(blocks[0], "Reporting-MTA")),
        recipients=recipients,
        original=_original(original_part) if original_part is not None else Original(),
    )


def _blocks(part: Message) -> list[Message]:
    """The report's field blocks: the email package splits message/delivery-status itself;
    anything else (the global kind, an encoded part) is split here on blank lines."""
    payload = part.get_payload()
    if part.get_content_type() == "message/delivery-status" and isinstance(payload, list):
        return [block for block in payload if isinstance(block, Message)]
    return [_HEADERS.parsestr(chunk) for chunk in _BLANK_LINE.split(_body(part)) if chunk.strip()]


def _body(part: Message) -> str:
    payload = part.get_payload()
    data: object
    if isinstance(payload, list):  # read as a message: its first block became the headers
        data = b"\n\n".join(p.as_bytes() for p in payload if isinstance(p, Message))
    else:
        data = part.get_payload(decode=True)
    return data.decode("utf-8", "replace") if isinstance(data, bytes) else str(payload)


def _recipient(block: Message) -> RecipientStatus | None:
    action = (_field(block, "Action") or "").lower().split(maxsplit=1)
    if not action:
        return None
    diagnostic = _typed(_field(block, "Diagnostic-Code"))
    return RecipientStatus(
        recipient=_address(_field(block, "Final-Recipient")),
        original_recipient=_address(_field(block, "Original-Recipient")),
        action=action[0],
        status=_status_code(_field(block, "Status")) or _status_code(diagnostic),
        diagnostic=diagnostic,
        remote_mta=_typed(_field(block, "Remote-MTA")),
    )


def _original(part: Message) -> Original:
    payload = part.get_payload()
    if isinstance(payload, list) and payload and isinstance(payload[0], Message):
        headers = payload[0]
    else:
        headers = _HEADERS.parsestr(_body(part))
    return Original(
        delivery_id=_field(headers, DELIVERY_HEADER),
        message_id=_field(headers, "Message-ID"),
        to=_addresses(headers, "To"),
        cc=_addresses(headers, "Cc"),
    )


def _field(block: Message, name: str) -> str | None:
    """A field's value, unfolded and bounded; None when absent or empty."""
    value = block.get(name)
    if value is None:
        return None
    text = " ".join(_text(value).split())[:_MAX_TEXT]
    return text or None


def _typed(value: str | None) -> str | None:
    """``type; value`` fields (``dns; mx.example.com``, ``smtp; 550 …``): the value."""
    if value is None:
        return None
    kind, semicolon, rest = value.partition(";")
    return (rest if semicolon else kind).strip() or None


def _address(value: str | None) -> str | None:
    """``rfc822; <ana@example.com>`` -> ``ana@example.com``."""
    address = _typed(value)
    if address is None:
        return None
    return address.strip("<> ").lower() or None


def _addresses(headers: Message, name: str) -> tuple[str, ...]:
    values = [_text(value) for value in headers.get_all(name, [])]
    return tuple(address.lower() for _, address in email.utils.getaddresses(values) if address)


def _status_code(text: str | None) -> str | None:
    match = _STATUS_CODE.search(text) if text else None
    return ".".join(match.groups()) if match else None


def _text(value: object) -> str:
    """A header value as text: compat32 gives a ``Header`` for 8-bit bytes (UTF-8, RFC
    6532), and RFC 2231 parameters come as tuples."""
    if isinstance(value, tuple):
        return str(email.utils.collapse_rfc2231_value(value))
    if isinstance(value, Header):
        pieces = decode_header(value)
        return "".join(
            piece.decode("utf-8", "replace") if isinstance(piece, bytes) else piece
            for piece, _ in pieces
        )
    return str(value)
