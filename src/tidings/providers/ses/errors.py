"""SES's error table: an answer other than 200 as a typed provider error, by its type.

The type is read as botocore reads a rest-json error: the ``x-amzn-ErrorType`` header up to
its first colon, else the body's ``__type`` (or ``code``) after its last ``#``; the text is
the body's ``message``. The SES v2 API reference lists SendEmail's errors; see
docs/providers.md for the table."""

from __future__ import annotations

import httpx

from tidings.providers._retry_after import parse_retry_after
from tidings.providers.base import (
    PermanentError,
    PoisonError,
    ProviderError,
    TransientError,
)

# Our own configuration (an identity, the account, the keys): an operator fixes it.
CONFIGURATION_RETRY_AFTER = 300.0


# The sending identity or account is not in a state to send (SES v2 API reference).
CONFIGURATION_ERRORS = frozenset(
    {
        "MailFromDomainNotVerifiedException",
        "AccountSuspendedException",
        "SendingPausedException",
        "NotFoundException",  # the configuration set (or identity) named does not exist
    }
)


# AWS's authentication answers (common errors): a key, a token, the clock, or IAM.
CREDENTIAL_ERRORS = frozenset(
    {
        "UnrecognizedClientException",
        "InvalidClientTokenId",
        "SignatureDoesNotMatch",
        "SignatureDoesNotMatchException",
        "InvalidSignatureException",
        "IncompleteSignature",
        "IncompleteSignatureException",
        "MissingAuthenticationToken",
        "MissingAuthenticationTokenException",
        "ExpiredToken",
        "ExpiredTokenException",
        "RequestExpired",
        "AccessDenied",
        "AccessDeniedException",
    }
)


THROTTLING_ERRORS = frozenset(
    {"TooManyRequestsException", "LimitExceededException", "Throttling", "ThrottlingException"}
)


def classify(response: httpx.Response, now: float) -> ProviderError:
    """The error for a refused SendEmail (docs/providers.md, Amazon SES)."""
    status = response.status_code
    kind, text = error_type(response)
    detail = f"SES {status} {kind}: {text}" if kind else f"SES {status}: {text}"
    if kind in CREDENTIAL_ERRORS or status in (401, 403):
        return _configuration(detail, "credentials")
    if kind in CONFIGURATION_ERRORS:
        return _configuration(detail, kind)
    if kind == "MessageRejected":
        if "not verified" in text.lower():  # the sender identity, or a sandbox recipient
            return _configuration(detail, "identity_not_verified")
        return PermanentError(detail, reason="MessageRejected")
    retry_after = parse_retry_after(response.headers.get("Retry-After"), now)
    if kind in THROTTLING_ERRORS or status == 429:
        return TransientError(detail, retry_after=retry_after, reason="rate_limited")
    if status >= 500 or status == 408:
        return TransientError(detail, retry_after=retry_after, reason=f"http_{status}")
    if status == 413:
        return PoisonError(detail, reason="payload_too_large")
    return PermanentError(detail, reason="bad_request" if status == 400 else f"http_{status}")


def _configuration(detail: str, reason: str) -> TransientError:
    return TransientError(detail, retry_after=CONFIGURATION_RETRY_AFTER, reason=reason)


def error_type(response: httpx.Response) -> tuple[str | None, str]:
    """``(error type, message)`` of an AWS rest-json error answer."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        body = {}
    header = response.headers.get("x-amzn-ErrorType")
    kind = header.split(":", 1)[0].strip() if header else None
    if not kind:
        code = body.get("__type") or body.get("code") or body.get("Code")
        kind = str(code).rsplit("#", 1)[-1] if code else None
    message = body.get("message") or body.get("Message") or response.text[:200]
    return kind or None, str(message)
