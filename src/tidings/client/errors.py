"""What the client raises: every error is a ``TidingsError``.

An answer of the API becomes the subclass for its status, carrying the server's
``{"error": {"code", "message", "field"}}``; a request that got no answer (connection
refused or lost, timeout) becomes ``TidingsConnectionError``. Both carry the request's
``idempotency_key`` when it had one: retrying later with that key is safe.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import httpx


@dataclass(frozen=True)
class FieldProblem:
    """One of several problems the server found in a request."""

    field: str | None
    message: str


class TidingsError(Exception):
    """An error of the tidings API, or of reaching it."""

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = None,
        code: str | None = None,
        field: str | None = None,
        problems: tuple[FieldProblem, ...] = (),
        idempotency_key: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status_code = status_code
        self.code = code
        self.field = field
        self.problems = problems
        self.idempotency_key = idempotency_key
        self.retry_after = retry_after

    def __str__(self) -> str:
        where = f" ({self.field})" if self.field else ""
        status = f"{self.status_code} " if self.status_code is not None else ""
        code = f"{self.code}: " if self.code else ""
        return f"{status}{code}{self.message}{where}"


class MissingIdempotencyKey(TidingsError, ValueError):
    """A send or campaign without ``business_id`` or ``idempotency_key``: refused before any
    request, since the server requires the header and a made-up key would make a retried
    send a second notification."""


class TidingsConnectionError(TidingsError):
    """No answer, after every retry: whether the server acted is unknown."""


class UnexpectedAnswer(TidingsError):
    """A 2xx answer the client cannot read (not the shape this client knows)."""


class InvalidRequest(TidingsError):
    """400 or 422: the request is malformed or a field is invalid (``field`` names it)."""


class AuthenticationError(TidingsError):
    """401 or 403: the API key is missing, wrong, or not allowed to do this."""


class NotFound(TidingsError):
    """404: no such notification, campaign, user, type or template."""


class Conflict(TidingsError):
    """409: typically ``idempotency_key_reused``, the key was used with another body."""


class PayloadTooLarge(TidingsError):
    """413: the request body is over the server's limit."""


class RateLimited(TidingsError):
    """429 after every retry, or with a Retry-After longer than the client waits."""


class ServerError(TidingsError):
    """5xx after every retry; with an Idempotency-Key, retrying later is safe."""


_BY_STATUS: dict[int, type[TidingsError]] = {
    400: InvalidRequest,
    401: AuthenticationError,
    403: AuthenticationError,
    404: NotFound,
    409: Conflict,
    413: PayloadTooLarge,
    422: InvalidRequest,
    429: RateLimited,
}


def error_from(
    response: httpx.Response, idempotency_key: str | None, retry_after: float | None = None
) -> TidingsError:
    """The error for a non-2xx answer, read from its JSON body when it has one (a proxy's
    or load balancer's answer may not)."""
    status = response.status_code
    kind = _BY_STATUS.get(status) or (ServerError if status >= 500 else TidingsError)
    body = _error_body(response)
    message = body.get("message")
    if not isinstance(message, str):
        message = response.text[:200].strip() or response.reason_phrase or f"HTTP {status}"
    return kind(
        message,
        status_code=status,
        code=_text(body.get("code")),
        field=_text(body.get("field")),
        problems=_problems(body.get("problems")),
        idempotency_key=idempotency_key,
        retry_after=retry_after,
    )


def _error_body(response: httpx.Response) -> dict[str, Any]:
    try:
        document = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return {}
    error = document.get("error") if isinstance(document, dict) else None
    return error if isinstance(error, dict) else {}


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _problems(value: object) -> tuple[FieldProblem, ...]:
    if not isinstance(value, list):
        return ()
    return tuple(
        FieldProblem(_text(p.get("field")), str(p.get("message", "")))
        for p in value
        if isinstance(p, dict)
    )
