"""Building the MIME message of one email delivery.

Headers with non-ASCII text go out as RFC 2047 encoded words of at most 75 characters each
(the limit of §2), folded onto lines of at most 78. The whole text is encoded, its spaces
inside the words, so that a decoder gives back exactly the text given: folding between words
adds no space and loses none (Python's own folder does both at times). ASCII headers are
left to the email package, which keeps them whole up to 998 characters.

Addresses go out with their domain in IDNA A-labels (``xn--…``), in the envelope and the
headers; an address header holds no encoded word (RFC 2047 §5). A non-ASCII local part is
sent as UTF-8 (RFC 6531/6532), which needs a server offering SMTPUTF8.
"""

from __future__ import annotations

import base64
import email.policy
import email.utils
from datetime import UTC, datetime
from email.message import EmailMessage

from tidings.providers.base import Message

try:
    import idna
except ImportError:  # it comes with email-validator and httpx; the stdlib codec is IDNA 2003
    idna = None  # type: ignore[assignment]

DELIVERY_HEADER = "X-Tidings-Delivery-Id"
# Headers we set ourselves; a message's own headers may not replace or duplicate them.
_OWN = {
    "from",
    "to",
    "cc",
    "bcc",
    "reply-to",
    "subject",
    "date",
    "message-id",
    DELIVERY_HEADER.lower(),
}
# RFC 5322 allows 998 characters a line; folding only above that keeps headers such as
# List-Unsubscribe on one line, byte for byte as given (a DKIM signer signs them as sent).
# 7bit: non-ASCII text goes quoted-printable or base64, so no server needs 8BITMIME.
_BUILD = email.policy.SMTP.clone(cte_type="7bit")
_POLICY = _BUILD.clone(max_line_length=998)
_POLICY_UTF8 = _POLICY.clone(utf8=True)  # RFC 6532: UTF-8 where an address needs it

_WORD_MAX = 75  # RFC 2047 §2
_LINE_MAX = 78  # RFC 5322 §2.1.1: SHOULD
_CHROME = len("=?utf-8?q??=")
# Bytes a Q word may carry as they are; the set of RFC 2047 §5(3), safe in a phrase too.
_Q_LITERAL = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789!*+-/")


def wire_domain(domain: str) -> str:
    """``domain`` in IDNA A-labels; ASCII as given. Raises ``ValueError`` if it has none."""
    if domain.isascii():
        return domain
    if idna is not None:
        return idna.encode(domain, uts46=True).decode("ascii")
    return domain.encode("idna").decode("ascii")


def wire_address(address: str) -> str:
    """The address as sent: the domain in A-labels, the local part as given (UTF-8 if so)."""
    local, at, domain = address.rpartition("@")
    return f"{local}{at}{wire_domain(domain)}" if at else address


def build_email(
    message: Message,
    *,
    sender: str,
    recipient: str,
    from_name: str | None,
    message_id_domain: str,
    now: datetime | None = None,
) -> tuple[EmailMessage, str]:
    """The MIME message (text/plain, plus an HTML alternative) and its Message-ID.

    ``sender`` and ``recipient`` are wire addresses (``wire_address``); the message's own
    sender (its type's), reply-to and cc go in the headers, never its bcc. Raises
    ``ValueError`` when a header cannot be encoded (a line break in a value).
    """
    content = message.content
    mail = EmailMessage(policy=_BUILD)
    message_id = email.utils.make_msgid(domain=message_id_domain)
    if message.sender is not None:
        sender, from_name = wire_address(message.sender.address), message.sender.name
    _set_from(mail, from_name, sender)
    _set_address(mail, "To", recipient)
    if message.cc:
        _set_address(mail, "Cc", ", ".join(wire_address(a) for a in message.cc))
    if message.reply_to:
        _set_address(mail, "Reply-To", wire_address(message.reply_to))
    _set_text(mail, "Subject", content.subject or "")
    mail["Date"] = email.utils.format_datetime(now or datetime.now(UTC))
    mail["Message-ID"] = message_id
    mail[DELIVERY_HEADER] = str(message.delivery_id)
    for name, value in message.headers.items():
        if name.lower() not in _OWN:
            _set_text(mail, name, value)
    mail.set_content(content.text)
    if content.html:
        mail.add_alternative(content.html, subtype="html")
    return mail, message_id


def as_bytes(mail: EmailMessage, *, smtputf8: bool = False) -> bytes:
    """The message as sent: CRLF line ends, long ASCII header lines kept whole; with
    ``smtputf8``, UTF-8 where an address header holds it (only sent with SMTPUTF8)."""
    return mail.as_bytes(policy=_POLICY_UTF8 if smtputf8 else _POLICY)


def _set_from(mail: EmailMessage, name: str | None, address: str) -> None:
    if not name:
        _set_address(mail, "From", address)
    elif name.isascii() and address.isascii():
        mail["From"] = email.utils.formataddr((name, address))
    else:
        # A non-ASCII name as encoded words; so too an ASCII one beside a UTF-8 address,
        # which formataddr refuses (an encoded word is valid for any display name).
        _check_one_line(name + address)
        words = encoded_words(name, first=_first_budget("From"))
        mail.set_raw("From", _fold("From", [*words, f"<{address}>"]))


def _set_address(mail: EmailMessage, name: str, value: str) -> None:
    """ASCII through the email package, as before; a UTF-8 address exactly as given."""
    if value.isascii():
        mail[name] = value
    else:
        _check_one_line(value)
        mail.set_raw(name, value)


def _set_text(mail: EmailMessage, name: str, value: str) -> None:
    """An unstructured header: non-ASCII text as encoded words."""
    if value.isascii():
        mail[name] = value
    else:
        _check_one_line(value)
        mail.set_raw(name, _fold(name, encoded_words(value, first=_first_budget(name))))


def _check_one_line(value: str) -> None:
    # The email package refuses the same for the headers it parses (header injection).
    if "\r" in value or "\n" in value or len(value.splitlines()) > 1:
        raise ValueError("Header values may not contain linefeed or carriage return characters")


def _first_budget(name: str) -> int:
    """The longest first word that keeps ``Name: word`` within 78 characters."""
    return max(24, min(_WORD_MAX, _LINE_MAX - len(name) - 2))  # 24: any one character fits


def encoded_words(text: str, *, first: int = _WORD_MAX) -> list[str]:
    """``text`` as UTF-8 encoded words, each at most 75 characters (the first ``first``).

    Each word holds whole characters (RFC 2047 §5: no character split between words). Q when
    it is the shorter form (mostly-Latin text stays readable), else B.
    """
    data = text.encode()
    use_q = len(_q(data)) <= len(base64.b64encode(data))
    words: list[str] = []
    chunk, budget = "", first
    for char in text:
        if chunk and _word_length(chunk + char, use_q) > budget:
            words.append(_word(chunk, use_q))
            chunk, budget = "", _WORD_MAX
        chunk += char
    words.append(_word(chunk, use_q))
    return words


def _word_length(chunk: str, use_q: bool) -> int:
    data = chunk.encode()
    return _CHROME + (len(_q(data)) if use_q else 4 * -(-len(data) // 3))


def _q(data: bytes) -> str:
    return "".join(
        chr(byte) if byte in _Q_LITERAL else "_" if byte == 0x20 else f"={byte:02X}"
        for byte in data
    )


def _word(chunk: str, use_q: bool) -> str:
    data = chunk.encode()
    if use_q:
        return f"=?utf-8?q?{_q(data)}?="
    return f"=?utf-8?b?{base64.b64encode(data).decode('ascii')}?="


def _fold(name: str, tokens: list[str]) -> str:
    """The tokens joined by spaces, a line break before one that would pass 78 characters."""
    folded, column = tokens[0], len(name) + 2 + len(tokens[0])
    for token in tokens[1:]:
        if column + 1 + len(token) > _LINE_MAX:
            folded, column = f"{folded}\r\n {token}", 1 + len(token)
        else:
            folded, column = f"{folded} {token}", column + 1 + len(token)
    return folded
