"""What an HTTP adapter says when no answer came: was the request perhaps sent?

httpx tells the phases apart. Connecting (``ConnectError``, ``ConnectTimeout``) or waiting
for a pooled connection (``PoolTimeout``) fails before a byte of the request left, and a
write that failed (``WriteError``) left it unfinished: the provider cannot have acted on
it. After that (``WriteTimeout``, ``ReadTimeout``, a connection reset or closed before the
answer), the provider may have received and acted on it: the outcome is ambiguous, and an
account's ``on_ambiguous`` decides what follows.
"""

from __future__ import annotations

import httpx

from tidings.providers.base import TransientError

# A write that failed outright left the request unfinished: the server cannot act on it.
_BEFORE_SENDING = (
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx.PoolTimeout,
    httpx.WriteError,
)


def no_answer(provider: str, error: httpx.TransportError) -> TransientError:
    """The transient error for a request that got no answer, ambiguous unless it never left."""
    if isinstance(error, _BEFORE_SENDING):
        return TransientError(f"{provider} unreachable: {type(error).__name__}")
    return TransientError(
        f"{provider} did not answer: {type(error).__name__} (perhaps sent)",
        reason="no_answer",
        ambiguous=True,
    )
