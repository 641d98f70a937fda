"""Building the MIME message of one email delivery."""

from __future__ import annotations

import email.policy
import email.utils
from datetime import UTC, datetime
from email.message import EmailMessage

from tidings.providers.base import Message

DELIVERY_HEADER = "X-Tidings-Delivery-Id"
# Headers we set ourselves; a message's own headers may not replace or duplicate them.
_OWN = {"from", "to", "subject", "date", "message-id", DELIVERY_HEADER.lower()}
# RFC 5322 allows 998 characters a line; folding only above that keeps headers such as
# List-Unsubscribe on one line, byte for byte as given (a DKIM signer signs them as sent).
# 7bit: non-ASCII text goes quoted-printable or base64, so no server needs 8BITMIME.
_BUILD = email.policy.SMTP.clone(cte_type="7bit")
_POLICY = _BUILD.clone(max_line_length=998)


def build_email(
    message: Message,
    *,
    from_address: str,
    from_name: str | None,
    message_id_domain: str,
    now: datetime | None = None,
) -> tuple[EmailMessage, str]:
    """The MIME message (text/plain, plus an HTML alternative) and its Message-ID.

    Raises ``ValueError`` when a header cannot be encoded (a CR or LF in a value).
    """
    content = message.content
    mail = EmailMessage(policy=_BUILD)
    message_id = email.utils.make_msgid(domain=message_id_domain)
    mail["From"] = email.utils.formataddr((from_name or "", from_address))
    mail["To"] = message.address
    mail["Subject"] = content.subject or ""
    mail["Date"] = email.utils.format_datetime(now or datetime.now(UTC))
    mail["Message-ID"] = message_id
    mail[DELIVERY_HEADER] = str(message.delivery_id)
    for name, value in message.headers.items():
        if name.lower() not in _OWN:
            mail[name] = value
    mail.set_content(content.text)
    if content.html:
        mail.add_alternative(content.html, subtype="html")
    return mail, message_id


def as_bytes(mail: EmailMessage) -> bytes:
    """The message as sent: CRLF line ends, long header lines kept whole."""
    return mail.as_bytes(policy=_POLICY)
