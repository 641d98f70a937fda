"""The vocabulary of the provider contract: what one answer of the simulator must become
(``Raised``), the cases a provider's row of the table fills, and ``NotApplicable``.

Nothing here imports a provider: ``adapters.py`` is the only module of the suite that does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import pytest

from tidings.providers.base import ProviderError
from tidings.states import Effect


@dataclass(frozen=True)
class NotApplicable:
    """A case that cannot apply to a provider, with the reason (shown as the skip reason)."""

    why: str


class Unchecked:
    """A value the row leaves unchecked (the table says so explicitly, per field)."""

    def __repr__(self) -> str:
        return "UNCHECKED"


UNCHECKED = Unchecked()


@dataclass(frozen=True)
class AtLeast:
    """A retry-after of at least ``seconds`` (an epoch-based reset, or a "long" retry)."""

    seconds: float

    def matches(self, value: float | None) -> bool:
        return value is not None and value >= self.seconds


@dataclass(frozen=True)
class Above:
    """A retry-after of more than ``seconds``."""

    seconds: float

    def matches(self, value: float | None) -> bool:
        return value is not None and value > self.seconds


RetryAfter = float | None | AtLeast | Above | Unchecked


@dataclass(frozen=True)
class Raised:
    """The error a send must raise: its exact class, reason, retry-after, effect, and a
    text its message contains (the provider's own words, when they matter)."""

    kind: type[ProviderError]
    reason: str | Unchecked
    retry_after: RetryAfter = UNCHECKED
    effect: Effect | None = None
    says: str | None = None

    def check(self, error: ProviderError) -> None:
        assert type(error) is self.kind, f"{type(error).__name__}: {error}"
        if not isinstance(self.reason, Unchecked):
            assert error.reason == self.reason, error
        if isinstance(self.retry_after, AtLeast | Above):
            assert self.retry_after.matches(error.retry_after), error.retry_after
        elif not isinstance(self.retry_after, Unchecked):
            assert error.retry_after == self.retry_after, error.retry_after
        assert error.effect is self.effect, error.effect
        if self.says is not None:
            assert self.says in str(error), str(error)


@dataclass(frozen=True)
class Answer:
    """One answer the simulator is told to give (its documented error name), and the error
    the adapter's error table makes of it."""

    script: str
    raised: Raised


@dataclass(frozen=True)
class Misconfigured:
    """An account the provider refuses (our configuration, not the message): the settings
    changed from the working account (a function of the simulator when they need it)."""

    id: str
    changes: dict[str, Any] | Callable[[Any], dict[str, Any]]
    raised: Raised
    # Refused by the adapter itself: the simulator never saw a request.
    before_any_request: bool = False


@dataclass(frozen=True)
class Repeat:
    """One delivery sent twice: the provider has no idempotency key, so the simulator gets
    both (and knows the second as a repeat by the delivery id it carries); ``same_id``:
    the provider's message id is the delivery id (APNs' apns-id, the webhook id).
    ``honoured``: the provider takes the delivery id as its idempotency key (Resend), so
    the second send is answered as the first (the same message id) and nothing is sent
    again."""

    same_id: bool = False
    honoured: bool = False


@dataclass(frozen=True)
class Ambiguous:
    """No answer in time (the simulator answers late): a transient error, ambiguous
    (``no_answer``) when the request may have been acted on; the account then retries or
    fails (at most once). ``marked=False``: the adapter does not mark it ambiguous (the row
    says why)."""

    on_ambiguous: str
    marked: bool = True
    says: str | None = None


@dataclass(frozen=True)
class Inbound:
    """The provider's callbacks to ``POST /v1/webhooks/{kind}/{account}``: the channel and
    recipient of the message they report on, and what a replay of a callback gets: refused
    (``replay_status``, ``replay_code``) or answered and deduplicated (200, duplicates 1)."""

    kind: str
    channel: str
    recipient: str
    replay: Literal["refused", "deduplicated"]
    # The settings of an account that cannot verify callbacks (no secret to check them).
    unconfigured: dict[str, Any]
    replay_status: int = 200
    replay_code: str | None = None


@dataclass(frozen=True)
class Callback:
    """One request a provider makes to tidings: path (with its query), body, headers."""

    path: str
    body: bytes
    headers: dict[str, str]


@dataclass(frozen=True)
class Sent:
    """A message sent through the dispatcher, as its callbacks name it."""

    account: str  # the settings' account it went through (the adapter's name)
    notification_id: str
    delivery_id: str
    provider_msg_id: str
    address: str
    payload: dict[str, Any]  # what the simulator received


Case = Any  # a filled case, NotApplicable, or None: missing (the suite names it)

# The cases every row must fill (or mark NotApplicable), in the order the suite reports them.
OUTBOUND_CASES = (
    "repeat",
    "answers",
    "rate_limited",
    "outage",
    "misconfigured",
    "ambiguous",
    "refused",
)
INBOUND_CASES = ("inbound",)


@dataclass
class Capabilities:
    """A provider's row: each case filled, ``NotApplicable``, or left out (None)."""

    repeat: Repeat | NotApplicable | None = None
    answers: tuple[Answer, ...] | NotApplicable | None = None
    rate_limited: Raised | NotApplicable | None = None
    outage: Raised | NotApplicable | None = None
    misconfigured: tuple[Misconfigured, ...] | NotApplicable | None = None
    ambiguous: Ambiguous | NotApplicable | None = None
    refused: Raised | NotApplicable | None = None
    inbound: Inbound | NotApplicable | None = None


def case(capabilities: Capabilities, provider: str, name: str) -> Any:
    """The row's ``name`` case; skipped when NotApplicable, failing when left out."""
    found = getattr(capabilities, name)
    if found is None:
        pytest.fail(
            f"provider {provider!r} has no {name!r} case: fill it in its row of "
            "tests/integration/contract/adapters.py, or mark it NotApplicable with the reason"
        )
    if isinstance(found, NotApplicable):
        pytest.skip(f"{provider}: {name} does not apply: {found.why}")
    return found
