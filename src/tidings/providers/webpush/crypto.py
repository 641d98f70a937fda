"""Web Push message encryption (RFC 8291, ``aes128gcm`` of RFC 8188) and VAPID (RFC 8292),
through the maintained libraries ``http_ece`` and ``py_vapid``, behind typed functions.

Each message gets a fresh ephemeral P-256 key and salt (``http_ece`` puts the key in the
record header as its key id). The VAPID JWT names the push service's origin as ``aud``,
expires within 24 hours (12 here) and carries the operator's contact as ``sub``.
"""

from __future__ import annotations

import os
from typing import cast
from urllib.parse import urlsplit

import http_ece
import py_vapid
from cryptography.hazmat.primitives.asymmetric import ec

from tidings.providers.webpush.subscription import Subscription

RECORD_SIZE = 4096
VAPID_LIFETIME_SECONDS = 12 * 3600


def encrypt(plaintext: bytes, subscription: Subscription) -> bytes:
    """The ``aes128gcm`` body for ``subscription``: header, then a single record."""
    ephemeral = ec.generate_private_key(ec.SECP256R1())
    body = http_ece.encrypt(
        plaintext,
        salt=os.urandom(16),
        private_key=ephemeral,
        dh=subscription.p256dh,
        auth_secret=subscription.auth,
        rs=RECORD_SIZE,
        version="aes128gcm",
    )
    return cast(bytes, body)


def load_vapid(private_key: str) -> py_vapid.Vapid02:
    """The application server's key: PEM, or base64url DER or raw 32 bytes (as
    ``vapid --gen`` and most web push guides write it). ValueError if unreadable."""
    try:
        if "-----BEGIN" in private_key:
            return py_vapid.Vapid02.from_pem(private_key.strip().encode())
        return py_vapid.Vapid02.from_string(private_key.strip())
    except Exception as error:  # py_vapid raises whatever its decoders raise
        raise ValueError(f"unreadable VAPID private key: {type(error).__name__}") from None


def audience(endpoint: str) -> str:
    """The push service's origin, the JWT's ``aud``: scheme, host and any port."""
    parts = urlsplit(endpoint)
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}"


def authorization(vapid: py_vapid.Vapid02, endpoint: str, subject: str, now: float) -> str:
    """``vapid t=<JWT>,k=<public key>`` for a request to ``endpoint``."""
    claims = {"aud": audience(endpoint), "exp": int(now) + VAPID_LIFETIME_SECONDS, "sub": subject}
    headers = vapid.sign(claims)
    return cast(str, headers["Authorization"])
