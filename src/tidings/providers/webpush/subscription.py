"""A browser's Web Push subscription, as a device token of platform ``web``.

``PushSubscription.toJSON()`` in the browser gives ``{"endpoint": "https://…",
"expirationTime": null, "keys": {"p256dh": "…", "auth": "…"}}``: the push service's URL
for this browser, its P-256 public key (uncompressed point, base64url) and its 16-byte
authentication secret (RFC 8291). tidings stores it as the device's token, in one canonical
form (``canonical``: compact JSON, ``endpoint`` then ``keys`` with ``p256dh`` then
``auth``, base64url without padding, ``expirationTime`` dropped), so that registering the
same subscription again finds the same device.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives.asymmetric import ec

from tidings.providers.ssrf import url_problem

MAX_ENDPOINT_CHARS = 800
_ALLOWED_KEYS = frozenset({"endpoint", "expirationTime", "keys"})


@dataclass(frozen=True)
class Subscription:
    endpoint: str
    p256dh: bytes  # the browser's public key, an uncompressed P-256 point (65 bytes)
    auth: bytes  # the browser's authentication secret (16 bytes)

    def canonical(self) -> str:
        keys = {"p256dh": b64url(self.p256dh), "auth": b64url(self.auth)}
        return json.dumps({"endpoint": self.endpoint, "keys": keys}, separators=(",", ":"))


def looks_like_subscription(token: str) -> bool:
    """A token written as a JSON object; any other ``web`` token is opaque (FCM's)."""
    return token.lstrip().startswith("{")


def parse(token: str) -> Subscription:
    """The subscription a token holds; ValueError naming what is wrong."""
    try:
        value: Any = json.loads(token)
    except ValueError:
        raise ValueError("a push subscription must be JSON") from None
    if not isinstance(value, dict):
        raise ValueError("a push subscription must be a JSON object")
    unknown = sorted(set(value) - _ALLOWED_KEYS)
    if unknown:
        raise ValueError(f"unknown push subscription field {unknown[0]!r}")
    keys = value.get("keys")
    if not isinstance(keys, dict):
        raise ValueError("a push subscription needs keys.p256dh and keys.auth")
    return Subscription(
        endpoint=_endpoint(value.get("endpoint")),
        p256dh=_public_key(keys.get("p256dh")),
        auth=_decoded(keys.get("auth"), "keys.auth", 16),
    )


def _endpoint(value: Any) -> str:
    if not isinstance(value, str) or len(value) > MAX_ENDPOINT_CHARS:
        raise ValueError(f"endpoint must be a URL of at most {MAX_ENDPOINT_CHARS} characters")
    problem = url_problem(value)
    if problem is not None:
        raise ValueError(f"endpoint {problem}")
    return value


def _public_key(value: Any) -> bytes:
    raw = _decoded(value, "keys.p256dh", 65)
    try:
        ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), raw)
    except ValueError:
        raise ValueError("keys.p256dh is not a P-256 public key") from None
    return raw


def _decoded(value: Any, name: str, size: int) -> bytes:
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a base64url string")
    try:
        raw = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
    except (binascii.Error, ValueError):
        raise ValueError(f"{name} is not base64url") from None
    if len(raw) != size:
        raise ValueError(f"{name} must decode to {size} bytes, not {len(raw)}")
    return raw


def b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")
