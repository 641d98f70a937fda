"""What Twilio's SMS (``twilio/``) and WhatsApp (``twilio_whatsapp/``) packages share: the
``X-Twilio-Signature`` of its callbacks, their form, and the delivery id in the status
callback URL.

``X-Twilio-Signature``: HMAC (SHA-1 by default) with the auth token, base64.

Form posts: the signed string is the full URL (query string included) followed by every
POST parameter sorted by name, each as name then value with no separator. JSON posts: the
URL carries ``bodySHA256`` (hex SHA-256 of the raw body) and only the URL is signed.
Twilio's own validator (twilio-python ``request_validator``) accepts the URL with and
without an explicit port, because Twilio's signing is inconsistent about it; so do we.
Webhooks signed with a SharedKey name their algorithm (``HMAC_SHA256``) in the
``X-Twilio-Webhooks-Signature-Settings`` header.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Callable, Iterable, Mapping
from typing import Any
from urllib.parse import SplitResult, parse_qs, parse_qsl, urlsplit

Params = Mapping[str, str | Iterable[str]]
# The query parameter of the status callback URL that names the delivery; the hook of the
# account's incoming messages (/v1/webhooks/{kind}/{account}/inbound).
DELIVERY_PARAM = "delivery"
INBOUND = "inbound"
SIGNATURE_HEADER = "X-Twilio-Signature"
SETTINGS_HEADER = "X-Twilio-Webhooks-Signature-Settings"
HASHES: dict[str, Callable[..., Any]] = {"HMAC_SHA1": hashlib.sha1, "HMAC_SHA256": hashlib.sha256}


def compute_signature(
    auth_token: str, url: str, params: Params | None = None, algorithm: str = "HMAC_SHA1"
) -> str:
    """The signature Twilio sends for a request to ``url`` carrying ``params``."""
    signed = url + "".join(f"{name}{value}" for name, value in _pairs(params or {}))
    digest = hmac.new(auth_token.encode(), signed.encode(), HASHES[algorithm.upper()]).digest()
    return base64.b64encode(digest).decode("ascii")


def verify_signature(
    auth_token: str,
    url: str,
    params: Params | None,
    signature: str | None,
    algorithm: str = "HMAC_SHA1",
) -> bool:
    """True when ``signature`` is what ``auth_token`` gives for this URL and form body."""
    if not signature or algorithm.upper() not in HASHES:
        return False
    given = signature.strip().encode()
    matches = [
        hmac.compare_digest(compute_signature(auth_token, u, params, algorithm).encode(), given)
        for u in _url_variants(url)
    ]
    return any(matches)


def verify_json_signature(
    auth_token: str, url: str, body: bytes, signature: str | None, algorithm: str = "HMAC_SHA1"
) -> bool:
    """JSON variant: the URL's ``bodySHA256`` must match the body, and the URL is signed."""
    declared = parse_qs(urlsplit(url).query).get("bodySHA256", [""])[0]
    if not declared or not hmac.compare_digest(declared.lower().encode(), body_sha256(body)):
        return False
    return verify_signature(auth_token, url, None, signature, algorithm)


def body_sha256(body: bytes) -> bytes:
    return hashlib.sha256(body).hexdigest().encode()


def algorithm_from_settings(header: str | None) -> str:
    """``algorithm=`` of the signature-settings header; HMAC_SHA1 when absent."""
    for part in (header or "").split(","):
        name, separator, value = part.partition("=")
        if separator and name.strip() == "algorithm" and value.strip():
            return value.strip().upper()
    return "HMAC_SHA1"


def _url_variants(url: str) -> list[str]:
    """The URL as given, without its port, and with the scheme's default port."""
    parts = urlsplit(url)
    host = parts.netloc.rsplit("@", 1)[-1]
    userinfo = parts.netloc[: len(parts.netloc) - len(host)]
    if parts.port is not None:
        bare = host.rsplit(":", 1)[0]
        return [url, _with_netloc(parts, userinfo + bare)]
    port = 443 if parts.scheme == "https" else 80
    return [url, _with_netloc(parts, f"{userinfo}{host}:{port}")]


def _with_netloc(parts: SplitResult, netloc: str) -> str:
    return parts._replace(netloc=netloc).geturl()


def _pairs(params: Params) -> list[tuple[str, str]]:
    """Sorted by name; a repeated name gives each distinct value, sorted (as twilio-python)."""
    pairs: list[tuple[str, str]] = []
    for name in sorted(params):
        value = params[name]
        values = [value] if isinstance(value, str) else sorted(set(value))
        pairs.extend((name, v) for v in values)
    return pairs


def with_delivery(url: str, delivery_id: str) -> str:
    """``url`` with ``delivery=<id>`` added to its query."""
    return f"{url}{'&' if '?' in url else '?'}{DELIVERY_PARAM}={delivery_id}"


def form_fields(body: bytes) -> dict[str, list[str]] | None:
    """A callback's form fields, each with its values (parsed here: no python-multipart)."""
    try:
        pairs = parse_qsl(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False)
    except (UnicodeDecodeError, ValueError):
        return None
    form: dict[str, list[str]] = {}
    for name, value in pairs:
        form.setdefault(name, []).append(value)
    return form
