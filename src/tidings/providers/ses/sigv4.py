"""AWS Signature Version 4 for one HTTP request (the SES adapter's only use of AWS auth).

As AWS documents it ("Create a signed AWS API request"): a canonical request (method, the
path normalised and URI-encoded again, the query sorted, the signed headers lower-cased
and trimmed, the SHA-256 of the body), a string to sign over its hash and the credential
scope ``date/region/service/aws4_request``, and an HMAC-SHA256 chain from ``AWS4`` + the
secret key through the date, region, service and ``aws4_request``. The result goes in
``Authorization`` with ``X-Amz-Date`` (and ``X-Amz-Security-Token`` for temporary
credentials, signed too). Checked against AWS's published test suite and botocore's
``SigV4Auth`` in tests/integration/test_provider_ses.py.
"""

from __future__ import annotations

import hashlib
import hmac
import posixpath
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import quote, unquote

ALGORITHM = "AWS4-HMAC-SHA256"
_UNRESERVED = "-_.~"  # RFC 3986: never percent-encoded


@dataclass(frozen=True)
class Credentials:
    access_key_id: str
    secret_access_key: str
    session_token: str | None = None


@dataclass(frozen=True)
class Scope:
    region: str
    service: str


def sign(
    method: str,
    raw_path: str,
    headers: Iterable[tuple[str, str]],
    body: bytes,
    credentials: Credentials,
    scope: Scope,
    now: datetime,
) -> dict[str, str]:
    """The headers that sign this request: ``X-Amz-Date``, ``Authorization`` and, with a
    session token, ``X-Amz-Security-Token``. ``headers`` must hold ``Host``; every header
    given is signed. ``raw_path`` is the path as sent, with its query string if any."""
    amz_date = now.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    added = {"X-Amz-Date": amz_date}
    if credentials.session_token:
        added["X-Amz-Security-Token"] = credentials.session_token
    path, _, query = raw_path.partition("?")
    canonical, signed = canonical_request(
        method, path, query, [*headers, *added.items()], hashlib.sha256(body).hexdigest()
    )
    credential_scope = f"{amz_date[:8]}/{scope.region}/{scope.service}/aws4_request"
    to_sign = "\n".join(
        (ALGORITHM, amz_date, credential_scope, hashlib.sha256(canonical.encode()).hexdigest())
    )
    key = signing_key(credentials.secret_access_key, amz_date[:8], scope)
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    added["Authorization"] = (
        f"{ALGORITHM} Credential={credentials.access_key_id}/{credential_scope}, "
        f"SignedHeaders={signed}, Signature={signature}"
    )
    return added


def canonical_request(
    method: str, path: str, query: str, headers: Iterable[tuple[str, str]], payload_hash: str
) -> tuple[str, str]:
    """The canonical request and its ``SignedHeaders`` list."""
    values: dict[str, list[str]] = {}
    for name, value in headers:
        # Trimmed, inner runs of spaces made one (AWS: "sequential spaces").
        values.setdefault(name.strip().lower(), []).append(" ".join(value.split()))
    names = sorted(values)
    lines = "".join(f"{name}:{','.join(values[name])}\n" for name in names)
    signed = ";".join(names)
    parts = (method.upper(), canonical_path(path), canonical_query(query), lines, signed)
    return "\n".join((*parts, payload_hash)), signed


def canonical_path(path: str) -> str:
    """Dot segments removed, then URI-encoded again (every service but S3 double-encodes)."""
    normal = posixpath.normpath(path or "/")
    if normal.startswith("//"):  # normpath keeps a leading double slash (POSIX)
        normal = "/" + normal.lstrip("/")
    if path.endswith("/") and not normal.endswith("/"):
        normal += "/"
    return quote(normal, safe="/" + _UNRESERVED)


def canonical_query(query: str) -> str:
    """Each name and value URI-encoded (space as %20), sorted by name, then value."""
    pairs = []
    for item in query.split("&") if query else []:
        name, _, value = item.partition("=")
        pairs.append((_encode(unquote(name)), _encode(unquote(value))))
    return "&".join(f"{name}={value}" for name, value in sorted(pairs))


def signing_key(secret: str, date: str, scope: Scope) -> bytes:
    key = ("AWS4" + secret).encode()
    for part in (date, scope.region, scope.service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return key


def _encode(text: str) -> str:
    return quote(text, safe=_UNRESERVED)
