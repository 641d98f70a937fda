"""The simulated SES's check of AWS Signature Version 4, as an AWS endpoint makes it.

Written from AWS's documentation of SigV4 ("Elements of an AWS API request signature",
"Create a signed AWS API request"), on its own: it shares no code with the signer tidings
uses, so that a mistake in one is not hidden by the same mistake in the other. The check:
the ``Authorization`` header's credential scope (a known access key, today's date as in
``X-Amz-Date``, the right region and service), a timestamp within five minutes, ``host``
and ``x-amz-date`` (and the session token, if any) among the signed headers, then the
signature recomputed over the request exactly as received.

Refusals carry the error type and message AWS answers with.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import quote, unquote

SKEW_SECONDS = 300.0
_AUTHORIZATION = re.compile(
    r"AWS4-HMAC-SHA256 Credential=(?P<credential>[^,\s]+),\s*"
    r"SignedHeaders=(?P<signed>[^,\s]+),\s*Signature=(?P<signature>[0-9a-f]{64})"
)
_INVALID_TOKEN = "The security token included in the request is invalid."
_MISMATCH = (
    "The request signature we calculated does not match the signature you provided. Check "
    "your AWS Secret Access Key and signing method. Consult the service documentation for "
    "details."
)


@dataclass(frozen=True)
class Refusal:
    status: int
    error: str  # the x-amzn-ErrorType
    message: str


@dataclass(frozen=True)
class Received:
    """A request as it arrived: the raw path and query, every header (repeats kept)."""

    method: str
    path: str
    query: str
    headers: Sequence[tuple[str, str]]
    body: bytes

    def values(self, name: str) -> list[str]:
        return [value for key, value in self.headers if key.lower() == name]


class SigV4Check:
    def __init__(
        self,
        *,
        access_key_id: str,
        secret_access_key: str,
        region: str,
        service: str,
        session_token: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.access_key_id = access_key_id
        self.secret_access_key = secret_access_key
        self.region = region
        self.service = service
        self.session_token = session_token
        self.clock = clock

    def refusal(self, request: Received) -> Refusal | None:
        """None when the request is signed by our key; else AWS's answer."""
        authorization = request.values("authorization")
        if not authorization:
            return Refusal(
                403, "MissingAuthenticationTokenException", "Missing Authentication Token"
            )
        found = _AUTHORIZATION.fullmatch(authorization[0].strip())
        if found is None:
            return Refusal(400, "IncompleteSignatureException", "Malformed Authorization header")
        key, *scope = found["credential"].split("/")
        if key != self.access_key_id or not self._token_matches(request):
            return Refusal(403, "UnrecognizedClientException", _INVALID_TOKEN)
        stamp = request.values("x-amz-date")
        problem = self._scope_problem(scope, stamp[0] if stamp else "")
        if problem is not None:
            return problem
        signed = found["signed"].split(";")
        required = {"host", "x-amz-date"} | (
            {"x-amz-security-token"} if self.session_token else set()
        )
        if not required <= set(signed) or signed != sorted(signed):
            return Refusal(403, "SignatureDoesNotMatchException", _MISMATCH)
        expected = self.signature(request, signed, stamp[0], "/".join(scope))
        if not hmac.compare_digest(expected, found["signature"]):
            return Refusal(403, "SignatureDoesNotMatchException", _MISMATCH)
        return None

    def _token_matches(self, request: Received) -> bool:
        tokens = request.values("x-amz-security-token")
        if self.session_token is None:
            return not tokens
        return len(tokens) == 1 and hmac.compare_digest(tokens[0], self.session_token)

    def _scope_problem(self, scope: list[str], stamp: str) -> Refusal | None:
        try:
            sent = datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
        except ValueError:
            return Refusal(400, "IncompleteSignatureException", "X-Amz-Date is missing or bad")
        now = self.clock()
        if abs(now - sent.timestamp()) > SKEW_SECONDS:
            earliest = datetime.fromtimestamp(now - SKEW_SECONDS, UTC).strftime("%Y%m%dT%H%M%SZ")
            return Refusal(
                403,
                "InvalidSignatureException",
                f"Signature expired: {stamp} is now earlier than {earliest} (now - 5 min.)",
            )
        if len(scope) != 4 or scope[0] != stamp[:8] or scope[3] != "aws4_request":
            return Refusal(403, "SignatureDoesNotMatchException", _MISMATCH)
        if scope[1] != self.region:
            return Refusal(
                403,
                "SignatureDoesNotMatchException",
                "Credential should be scoped to a valid region.",
            )
        if scope[2] != self.service:
            return Refusal(
                403,
                "SignatureDoesNotMatchException",
                f"Credential should be scoped to correct service: '{self.service}'.",
            )
        return None

    def signature(self, request: Received, signed: list[str], stamp: str, scope: str) -> str:
        """The hex signature AWS computes for ``request`` (documented steps 1 to 4)."""
        canonical = "\n".join(
            [
                request.method,
                _uri(request.path),
                _query(request.query),
                "".join(f"{name}:{_header(request, name)}\n" for name in signed),
                ";".join(signed),
                hashlib.sha256(request.body).hexdigest(),
            ]
        )
        string_to_sign = "\n".join(
            ["AWS4-HMAC-SHA256", stamp, scope, hashlib.sha256(canonical.encode()).hexdigest()]
        )
        key = b"AWS4" + self.secret_access_key.encode()
        for part in scope.split("/"):
            key = hmac.digest(key, part.encode(), "sha256")
        return hmac.new(key, string_to_sign.encode(), "sha256").hexdigest()


def _uri(path: str) -> str:
    """Each segment of the path as received encoded again; "." and ".." resolved."""
    segments: list[str] = []
    for segment in path.split("/")[1:]:
        if segment == "..":
            if segments:
                segments.pop()
        elif segment not in (".", ""):
            segments.append(segment)
    trailing = "/" if path.endswith("/") and segments else ""
    return "/" + "/".join(quote(s, safe="-_.~") for s in segments) + trailing


def _query(query: str) -> str:
    pairs = []
    for item in filter(None, query.split("&")):
        name, _, value = item.partition("=")
        pairs.append((quote(unquote(name), safe="-_.~"), quote(unquote(value), safe="-_.~")))
    return "&".join(f"{n}={v}" for n, v in sorted(pairs))


def _header(request: Received, name: str) -> str:
    return ",".join(re.sub(" +", " ", value.strip()) for value in request.values(name))
