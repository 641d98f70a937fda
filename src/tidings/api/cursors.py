"""Page cursors: the opaque text a list answers as ``next`` and takes back as ``after``.

A cursor is base64url of its fields joined by a separator. What a caller sends back is
untrusted: every field is checked here, and each number bounded to what the database can
compare (a BIGINT), so that a crafted cursor is a 422 naming ``after``, never a 500 nor a
page of something else.
"""

from __future__ import annotations

import base64
import binascii
import uuid
from datetime import UTC, datetime

from tidings.refusal import Refusal

# The largest value of a BIGINT column (event.txid, event.id): a cursor holds only those.
MAX_NUMBER = 2**63 - 1
_DIGITS = frozenset("0123456789")


def refusal(field: str = "after") -> Refusal:
    return Refusal("invalid_cursor", f"{field} is not a cursor this API gave (use next)", field)


def encode(*fields: str, separator: str = ".", padded: bool = False) -> str:
    text = base64.urlsafe_b64encode(separator.join(fields).encode()).decode()
    return text if padded else text.rstrip("=")


def decode(text: str, count: int, separator: str = ".", field: str = "after") -> list[str]:
    """The ``count`` fields of the cursor ``text`` (padding optional); else the refusal."""
    try:
        padded = text + "=" * (-len(text) % 4)
        raw = base64.urlsafe_b64decode(padded.encode("ascii"))
        fields = raw.decode("ascii").split(separator)
    except (ValueError, binascii.Error):  # UnicodeError included
        raise refusal(field) from None
    if len(fields) != count:
        raise refusal(field)
    return fields


def number(text: str, field: str = "after") -> int:
    """A decimal cursor field: digits only, 0 to ``MAX_NUMBER``."""
    if not text or len(text) > 19 or not set(text) <= _DIGITS:
        raise refusal(field)
    value = int(text)
    if value > MAX_NUMBER:
        raise refusal(field)
    return value


def moment(text: str, field: str = "after") -> datetime:
    """An ISO 8601 cursor field with its offset, as UTC."""
    try:
        found = datetime.fromisoformat(text)
        if found.tzinfo is None:
            raise ValueError("naive")
        return found.astimezone(UTC)
    except (ValueError, OverflowError):  # year 1 at +14:00 leaves the calendar
        raise refusal(field) from None


def identifier(text: str, field: str = "after") -> uuid.UUID:
    try:
        return uuid.UUID(text)
    except ValueError:
        raise refusal(field) from None
