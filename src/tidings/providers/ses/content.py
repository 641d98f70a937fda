"""The SES v2 ``SendEmail`` request body of one delivery.

``Content.Simple`` whenever its limits allow (SES v2 API reference, ``Message`` and
``MessageHeader``): a 7-bit subject (non-ASCII as RFC 2047 encoded words), the text and HTML
parts in UTF-8, and up to 15 extra headers of printable ASCII, each name at most 126
characters, value at most 995 and both together at most 996. The delivery id goes as the
``X-Tidings-Delivery-Id`` header (as SMTP sends it) and as the ``tidings_delivery_id`` tag,
which SES event publishing returns in every event (tag values allow ``[A-Za-z0-9_-]``: a
UUID fits). A header Simple cannot carry makes the message ``Content.Raw`` instead: the MIME
message the SMTP adapter sends, base64.

The From is the type's sender if it has one, else the account's; the reply-to goes in
``ReplyToAddresses``, copies in ``Destination`` (without the recipient or repeats). SES does
not support SMTPUTF8 (API reference, ``Destination``): a recipient or sender with a
non-ASCII local part fails permanently, a copy or reply-to with one is left out, and domains
go in IDNA A-labels.
"""

from __future__ import annotations

import base64
import email.utils
import re
from typing import Any

from tidings.providers import email_api
from tidings.providers.base import Message, PermanentError, PoisonError
from tidings.providers.mime import (
    DELIVERY_HEADER,
    as_bytes,
    build_email,
    encoded_words,
    wire_address,
    wire_domain,
)
from tidings.providers.ses.events import DELIVERY_TAG

TYPE_TAG = "tidings_type"
MAX_HEADERS = 15
MAX_HEADER_VALUE = 995
MAX_HEADER_LINE = 996  # name and value together
_HEADER_NAME = re.compile(r"[!-9;-~]{1,126}")  # printable ASCII but the colon
_HEADER_VALUE = re.compile(r"[ -~]+")  # printable ASCII
_TAG_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
# Headers SES composes itself from the request; a message's own may not replace them.
_OWN = frozenset(
    {"from", "to", "cc", "bcc", "subject", "date", "message-id", "reply-to", "return-path"}
    | {DELIVERY_HEADER.lower()}
)


def send_email_body(
    message: Message, *, from_email: str, from_name: str | None, configuration_set: str | None
) -> dict[str, Any]:
    """The JSON body of ``POST /v2/email/outbound-emails`` for one delivery."""
    recipient = _ascii_address(message.address)
    body: dict[str, Any] = {
        "FromEmailAddress": _sender(message, from_email, from_name),
        "Destination": _destination(message, recipient),
        "Content": _content(message, recipient, from_email, from_name),
        "EmailTags": [
            {"Name": DELIVERY_TAG, "Value": str(message.delivery_id)},
            {"Name": TYPE_TAG, "Value": tag_value(message.type)},
        ],
    }
    if reply_to := _reply_to(message):
        body["ReplyToAddresses"] = [reply_to]
    if configuration_set:
        body["ConfigurationSetName"] = configuration_set
    return body


def _sender(message: Message, from_email: str, from_name: str | None) -> str:
    """The type's sender if it has one (a verified identity too), else the account's; a
    non-ASCII name as an RFC 2047 phrase."""
    if message.sender is not None:
        from_email, from_name = message.sender.address, message.sender.name
    return email.utils.formataddr((from_name or "", _ascii_address(from_email)), "utf-8")


def _destination(message: Message, recipient: str) -> dict[str, list[str]]:
    """To, and the copies SES can take (an ASCII local part): a copy is not the delivery."""
    cc, bcc = email_api.copies(message)
    destination = {"ToAddresses": [recipient]}
    for name, addresses in (("CcAddresses", cc), ("BccAddresses", bcc)):
        kept = [address for address in addresses if address.isascii()]
        if kept:
            destination[name] = kept
    return destination


def _reply_to(message: Message) -> str | None:
    """Where replies go, when SES can write it (an IDNA domain, an ASCII local part)."""
    try:
        wire = wire_address(message.reply_to) if message.reply_to else None
    except ValueError:
        return None
    return wire if wire is not None and wire.isascii() else None


def tag_value(text: str) -> str:
    """``text`` as a tag value: each character SES refuses becomes ``_``."""
    return _TAG_UNSAFE.sub("_", text)[:256] or "_"


def _ascii_address(address: str) -> str:
    """The address as sent; PermanentError if SES cannot send to or from it."""
    wire = email_api.recipient(address)
    if not wire.isascii():
        raise PermanentError(
            f"SES does not support SMTPUTF8, which {address!r} needs (a non-ASCII local part)",
            reason="smtputf8_unsupported",
        )
    return wire


def _content(
    message: Message, recipient: str, from_email: str, from_name: str | None
) -> dict[str, Any]:
    content = message.content
    email_api.require_content(content)
    headers = simple_headers(message)
    if headers is None:
        return {"Raw": {"Data": _raw(message, recipient, from_email, from_name)}}
    body = {"Text": _utf8(content.text)} if content.text else {}
    if content.html:
        body["Html"] = _utf8(content.html)
    simple = {
        "Subject": _utf8(_ascii_text(content.subject or "")),
        "Body": body,
        "Headers": headers,
    }
    return {"Simple": simple}


def simple_headers(message: Message) -> list[dict[str, str]] | None:
    """The headers as ``Content.Simple`` takes them, or None when one does not fit."""
    wanted = {DELIVERY_HEADER: str(message.delivery_id)}
    wanted |= {k: v for k, v in message.headers.items() if k.lower() not in _OWN}
    if len(wanted) > MAX_HEADERS:
        return None
    headers = []
    for name, value in wanted.items():
        if "\r" in value or "\n" in value:
            raise PoisonError(f"header {name!r} holds a line break", reason="bad_message")
        text = _ascii_text(value)
        fits = len(text) <= MAX_HEADER_VALUE and len(name) + len(text) <= MAX_HEADER_LINE
        if not (_HEADER_NAME.fullmatch(name) and _HEADER_VALUE.fullmatch(text) and fits):
            return None
        headers.append({"Name": name, "Value": text})
    return headers


def _ascii_text(text: str) -> str:
    """ASCII as given; otherwise RFC 2047 encoded words (SES wants 7-bit header text)."""
    return text if text.isascii() else " ".join(encoded_words(text))


def _utf8(text: str) -> dict[str, str]:
    return {"Data": text, "Charset": "UTF-8"}


def _raw(message: Message, recipient: str, from_email: str, from_name: str | None) -> str:
    sender = wire_address(from_email)
    try:
        mail, _ = build_email(
            message,
            sender=sender,
            recipient=recipient,
            from_name=from_name,
            message_id_domain=wire_domain(sender.rpartition("@")[2]) or "localhost",
        )
        raw = as_bytes(mail)
    except (ValueError, TypeError) as error:
        raise PoisonError(f"cannot build the email: {error}", reason="bad_message") from error
    return base64.b64encode(raw).decode("ascii")
