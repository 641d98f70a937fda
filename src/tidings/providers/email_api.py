"""What the HTTP email APIs (Mailgun, Postmark) share: addresses and headers as sent."""

from __future__ import annotations

import email.utils
from collections.abc import Iterator, Mapping

from tidings.providers.base import Content, Message, PermanentError, PoisonError
from tidings.providers.mime import wire_address

# Headers the APIs set from their own fields; a message's headers may not replace them.
RESERVED_HEADERS = frozenset(
    {"from", "to", "cc", "bcc", "subject", "reply-to", "content-type", "message-id", "date"}
)


def require_content(content: Content, *, subject: bool = True) -> None:
    """PoisonError for an email an API would refuse whatever the retry: no text and no HTML,
    or (where the API requires one: SendGrid, SES, Mailgun) no subject."""
    if not content.text and not content.html:
        raise PoisonError("the email has neither text nor HTML", reason="empty_content")
    if subject and not content.subject:
        raise PoisonError("the email has no subject", reason="empty_subject")


def recipient(address: str) -> str:
    """The address as sent (an internationalised domain in A-labels); PermanentError if its
    domain cannot be encoded."""
    try:
        return wire_address(address)
    except ValueError as error:  # idna refuses the domain
        message = f"cannot send to {address!r}: {error}"
        raise PermanentError(message, reason="bad_address") from error


def sender(message: Message, address: str, name: str | None) -> str:
    """The From: the type's sender if it has one, else the account's ``address`` and
    ``name``, as ``Name <address>`` (the name quoted, or RFC 2047 encoded, where it must be)."""
    if message.sender is not None:
        address, name = message.sender.address, message.sender.name
    return email.utils.formataddr((name or "", address))


def copies(message: Message) -> tuple[list[str], list[str]]:
    """Cc and Bcc as sent, without the recipient or repeats (ignoring case): a provider
    would send the same address twice, or refuse the message."""
    seen = {message.address.lower()}
    found: tuple[list[str], list[str]] = ([], [])
    for kept, addresses in zip(found, (message.cc, message.bcc), strict=True):
        for address in addresses:
            if address.lower() not in seen:
                seen.add(address.lower())
                kept.append(recipient(address))
    return found


def custom_headers(headers: Mapping[str, str]) -> Iterator[tuple[str, str]]:
    """The message's own headers (List-Unsubscribe…), without those the API sets itself."""
    return ((k, v) for k, v in headers.items() if k.lower() not in RESERVED_HEADERS)
