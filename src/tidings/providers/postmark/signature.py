"""HTTP Basic credentials (RFC 7617) of a webhook request, checked in constant time.

For providers that do not sign their webhooks (Postmark): the credentials are put in the
webhook URL at the provider, which sends them as ``Authorization: Basic``.
"""

from __future__ import annotations

import base64
import binascii
import hmac

# A header longer than this is no credentials of ours (and not worth decoding).
MAX_HEADER = 1024


def credentials(header: str | None) -> tuple[str, str] | None:
    """(user, password) from an ``Authorization`` header, or None when it holds none."""
    if not header or len(header) > MAX_HEADER:
        return None
    scheme, _, encoded = header.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    user, colon, password = decoded.partition(":")
    return (user, password) if colon else None


def matches(header: str | None, user: str, password: str) -> bool:
    """True when the header carries exactly ``user`` and ``password``."""
    given = credentials(header)
    if given is None:
        return False
    # Both compared whatever the first gives, so the time tells nothing about either.
    user_ok = hmac.compare_digest(given[0].encode(), user.encode())
    password_ok = hmac.compare_digest(given[1].encode(), password.encode())
    return user_ok and password_ok
