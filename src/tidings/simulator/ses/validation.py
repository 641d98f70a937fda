"""The simulated SES's checks of a SendEmail body: the constraints of the SES v2 API
reference (``SendEmailRequest``, ``Destination``, ``EmailContent``, ``Message``,
``MessageHeader``, ``RawMessage``, ``MessageTag``) that a sender can get wrong.

Each check answers ``(error type, message)`` as SES would, or None when the body is fine.
"""

from __future__ import annotations

import base64
import binascii
import email.message
import email.parser
import email.policy
import email.utils
import re
from typing import Any

Problem = tuple[str, str]
MAX_RECIPIENTS = 50
MAX_HEADERS = 15
MAX_MESSAGE_BYTES = 40 * 1024 * 1024
_ADDRESS = re.compile(r"[^@\s<>]+@[^@\s<>]+\.[^@\s<>]+")
_HEADER_NAME = re.compile(r"[!-9;-@A-~]+")
_HEADER_VALUE = re.compile(r"[ -~]*")
_TAG = re.compile(r"[A-Za-z0-9_-]{1,256}")
BAD = "BadRequestException"


def problem(body: Any) -> Problem | None:
    """What SES refuses in ``body``, first problem first."""
    if not isinstance(body, dict):
        return BAD, "The request body is not a JSON object."
    # Raw content may leave both out: SES takes them from the message's headers.
    raw = isinstance(body.get("Content"), dict) and "Raw" in body["Content"]
    return (
        (None if raw and "FromEmailAddress" not in body else _sender(body.get("FromEmailAddress")))
        or (None if raw and "Destination" not in body else _destination(body.get("Destination")))
        or _reply_to(body.get("ReplyToAddresses", []))
        or _content(body.get("Content"))
        or _tags(body.get("EmailTags"))
        or (_raw_recipients(body) if raw and "Destination" not in body else None)
    )


def sender(body: dict[str, Any]) -> str:
    """The From address of a body ``problem`` accepted (of Raw content: its From header)."""
    given = body.get("FromEmailAddress") or str(_raw_message(body)["From"])
    return email.utils.parseaddr(given)[1]


def recipients(body: dict[str, Any]) -> list[str]:
    """The recipients of a body ``problem`` accepted: its Destination's To addresses, else
    (Raw content) the To, Cc and Bcc of the message's headers."""
    if "Destination" in body:
        return [str(address) for address in body["Destination"]["ToAddresses"]]
    message = _raw_message(body)
    fields = [str(value) for name in ("To", "Cc", "Bcc") for value in message.get_all(name, [])]
    return [address for _name, address in email.utils.getaddresses(fields) if address]


def _raw_message(body: dict[str, Any]) -> email.message.EmailMessage:
    mime = base64.b64decode(body["Content"]["Raw"]["Data"])
    parsed = email.parser.BytesParser(policy=email.policy.default).parsebytes(mime)
    assert isinstance(parsed, email.message.EmailMessage)
    return parsed


def _raw_recipients(body: dict[str, Any]) -> Problem | None:
    found = recipients(body)
    if not found:
        return BAD, "Missing required field Destination: the raw message names no recipient."
    if len(found) > MAX_RECIPIENTS:
        return BAD, f"Recipient count exceeds {MAX_RECIPIENTS}."
    return _addresses(found)


def _sender(value: Any) -> Problem | None:
    if not isinstance(value, str) or not value:
        return BAD, "Missing required field FromEmailAddress."
    address = email.utils.parseaddr(value)[1]
    if not _ADDRESS.fullmatch(address) or not address.isascii():
        return BAD, f"Invalid FromEmailAddress: {value}"
    return None


def _destination(value: Any) -> Problem | None:
    to = value.get("ToAddresses") if isinstance(value, dict) else None
    if not isinstance(to, list) or not to:
        return BAD, "Missing required field Destination.ToAddresses."
    lists = [value.get(name, []) for name in ("ToAddresses", "CcAddresses", "BccAddresses")]
    if not all(isinstance(addresses, list) for addresses in lists):
        return BAD, "Destination addresses must be lists."
    everyone = [address for addresses in lists for address in addresses]
    if len(everyone) > MAX_RECIPIENTS:
        return BAD, f"Recipient count exceeds {MAX_RECIPIENTS}."
    return _addresses(everyone)


def _reply_to(value: Any) -> Problem | None:
    if not isinstance(value, list):
        return BAD, "ReplyToAddresses must be a list."
    return _addresses(value)


def _addresses(addresses: list[Any]) -> Problem | None:
    for address in addresses:
        if not isinstance(address, str) or not _ADDRESS.fullmatch(address):
            return BAD, f"Illegal address: {address}"
        if not address.isascii():  # SES has no SMTPUTF8; domains go as Punycode
            return BAD, f"Address contains non-ASCII characters: {address}"
    return None


def _content(value: Any) -> Problem | None:
    given = [k for k in ("Simple", "Raw", "Template") if isinstance(value, dict) and k in value]
    if len(given) != 1:
        return BAD, "Content must hold exactly one of Simple, Raw and Template."
    if given[0] == "Simple":
        return _simple(value["Simple"])
    if given[0] == "Raw":
        return _raw(value["Raw"])
    return BAD, "Templates are not simulated."


def _simple(message: Any) -> Problem | None:
    subject = message.get("Subject") if isinstance(message, dict) else None
    if not isinstance(subject, dict) or not isinstance(subject.get("Data"), str):
        return BAD, "Missing required field Content.Simple.Subject.Data."
    body = message.get("Body")
    parts = [body.get(k) for k in ("Text", "Html")] if isinstance(body, dict) else []
    if not any(isinstance(p, dict) and isinstance(p.get("Data"), str) for p in parts):
        return BAD, "Content.Simple.Body must hold Text or Html."
    return _headers(message.get("Headers", []))


def _headers(headers: Any) -> Problem | None:
    if not isinstance(headers, list) or len(headers) > MAX_HEADERS:
        return BAD, f"Content.Simple.Headers: at most {MAX_HEADERS} headers."
    for header in headers:
        name = header.get("Name") if isinstance(header, dict) else None
        value = header.get("Value") if isinstance(header, dict) else None
        if not isinstance(name, str) or not _HEADER_NAME.fullmatch(name) or len(name) > 126:
            return BAD, f"Invalid header name: {name!r}"
        if not isinstance(value, str) or not value or not _HEADER_VALUE.fullmatch(value):
            return BAD, f"Invalid value of header {name}: printable ASCII only."
        if len(value) > 995 or len(name) + len(value) > 996:
            return BAD, f"Header {name} is too long."
    return None


def _raw(raw: Any) -> Problem | None:
    data = raw.get("Data") if isinstance(raw, dict) else None
    try:
        mime = base64.b64decode(data, validate=True) if isinstance(data, str) else None
    except (binascii.Error, ValueError):
        mime = None
    if not mime:
        return BAD, "Content.Raw.Data must be base64."
    if len(mime) > MAX_MESSAGE_BYTES:
        return "MessageRejected", "Message length is more than 40 MB."
    parsed = email.parser.BytesParser(policy=email.policy.default).parsebytes(mime)
    if parsed.defects or parsed["From"] is None:
        return "MessageRejected", "Illegal header or missing From in the raw message."
    if any(len(line) > 1000 for line in mime.split(b"\r\n")):
        return "MessageRejected", "A line of the message is longer than 1,000 characters."
    return None


def _tags(tags: Any) -> Problem | None:
    if tags is None:
        return None
    if not isinstance(tags, list):
        return BAD, "EmailTags must be a list."
    for tag in tags:
        name = tag.get("Name") if isinstance(tag, dict) else None
        value = tag.get("Value") if isinstance(tag, dict) else None
        for text in (name, value):
            if not isinstance(text, str) or not _TAG.fullmatch(text):
                return BAD, (
                    f"Invalid tag {text!r}: only alphanumeric ASCII characters, '_', and '-' "
                    "are allowed."
                )
    return None
