"""Idempotency keys derived from business ids.

The server takes an ``Idempotency-Key`` of 1-255 characters, unique per namespace. A key
derived from ``(type, business_id)`` is the same on every retry and every process, so the
caller never has to store one: ``order.shipped/order-1234`` stays readable in
``GET /v1/notifications/{id}``. The type is part of it (type names hold no ``/``), so two
types with one business id never share a key.
"""

from __future__ import annotations

import hashlib
import re

from .errors import MissingIdempotencyKey

MAX_KEY_LENGTH = 255
# Printable ASCII without space at either end: HTTP trims a header value's outer spaces, and
# other characters may not survive a header at all; such business ids are hashed.
_PLAIN = re.compile(r"[!-~](?:[ -~]*[!-~])?")
# The server's rule for type names (a type outside it is refused anyway, by the server).
_TYPE = re.compile(r"[a-z0-9][a-z0-9._:-]{0,99}")
# Marks a hashed business id; a business id that itself begins with it is hashed too, so a
# literal id can never be mistaken for a digest.
_HASHED = "~"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def key_from_business_id(type_name: str, business_id: str) -> str:
    """The Idempotency-Key for ``business_id`` of type ``type_name``: deterministic, at most
    255 characters, and a valid HTTP header value whatever the business id holds."""
    if not business_id:
        raise ValueError("business_id must not be empty")
    if not _TYPE.fullmatch(type_name):
        return _HASHED + _digest(f"{type_name}\x00{business_id}")
    literal = f"{type_name}/{business_id}"
    plain = _PLAIN.fullmatch(business_id) and not business_id.startswith(_HASHED)
    if plain and len(literal) <= MAX_KEY_LENGTH:
        return literal
    return f"{type_name}/{_HASHED}{_digest(business_id)}"


def resolve_key(type_name: str, business_id: str | None, idempotency_key: str | None) -> str:
    """The key a request is sent with: the explicit one, else the one derived from the
    business id; neither (or both) is refused before anything is sent."""
    if business_id is not None and idempotency_key is not None:
        raise ValueError("give business_id or idempotency_key, not both")
    if idempotency_key is not None:
        if not 1 <= len(idempotency_key) <= MAX_KEY_LENGTH:
            raise ValueError(f"idempotency_key must be 1-{MAX_KEY_LENGTH} characters")
        return idempotency_key
    if business_id is not None:
        return key_from_business_id(type_name, business_id)
    raise MissingIdempotencyKey(
        f"a {type_name!r} send needs business_id (the key is derived from it) or "
        "idempotency_key: the server requires an Idempotency-Key, and it is what makes a "
        "retried request safe",
        code="idempotency_key_required",
        field="Idempotency-Key",
    )
