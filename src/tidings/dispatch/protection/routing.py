"""Which provider account a delivery goes to: breakers and failover chains (docs/architecture.md,
Providers, failover and the circuit breaker).

Each channel has a failover chain of account names, primary first. A delivery goes to the
first account whose breaker allows it. When the primary's breaker is open:

- transactional email and SMS fail over to the next account in the chain that allows;
- everything else is deferred until the primary's breaker may probe again (reason
  ``breaker_open``, the attempt given back). Reminders and marketing can wait a few seconds,
  and a backup account is often dearer or keeps its sender reputation for transactional
  mail; push cannot fail over at all (a device token belongs to one FCM project / APNs
  topic).

``admit`` adds the rate limiter for a batch of claimed deliveries: route each, take tokens per
account, and defer (reason ``rate_limited``) those that got none.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, NamedTuple, Protocol, TypeVar

from tidings.dispatch.protection.ratelimit import RateLimiter, ration
from tidings.priorities import Category, Channel, Priority

FAILOVER_CHANNELS = frozenset({Channel.EMAIL, Channel.SMS})
FAILOVER_CATEGORIES = frozenset({Category.TRANSACTIONAL})
# Floors of a deferral, so that a deferred row is not claimed again at once in a loop.
MIN_BREAKER_DEFER = 1.0
MIN_RATE_DEFER = 0.05

T = TypeVar("T")


class Breaker(Protocol):
    def allow(self, account: str) -> bool: ...

    def retry_in(self, account: str) -> float: ...

    def cancel(self, account: str) -> None: ...


@dataclass(frozen=True)
class Send:
    account: str
    failover: bool = False  # not the chain's primary


@dataclass(frozen=True)
class Defer:
    until_seconds: float  # from now
    reason: str  # "breaker_open" or "rate_limited"
    account: str | None = None  # rate_limited: the account without a token


Route = Send | Defer


def fails_over(channel: Channel, category: Category) -> bool:
    return channel in FAILOVER_CHANNELS and category in FAILOVER_CATEGORIES


def route(
    channel: Channel,
    category: Category,
    chain: Sequence[str],
    breaker: Breaker,
    *,
    min_defer: float = MIN_BREAKER_DEFER,
) -> Route:
    """The account to send to, or how long to wait. A ``Send`` may hold a half-open
    breaker's probe: report the call's outcome to the breaker, or ``cancel`` it."""
    if not chain:
        raise ValueError(f"no provider account for {channel.value}")
    candidates = chain if fails_over(channel, category) else chain[:1]
    for index, account in enumerate(candidates):
        if breaker.allow(account):
            return Send(account, failover=index > 0)
    wait = min(breaker.retry_in(account) for account in candidates)
    return Defer(max(wait, min_defer), "breaker_open")


class Target(NamedTuple):
    """Where one delivery may go."""

    channel: Channel
    category: Category
    chain: Sequence[str]


@dataclass
class Admission(Generic[T]):
    send: list[tuple[T, str]] = field(default_factory=list)  # item, account
    defer: list[tuple[T, Defer]] = field(default_factory=list)


async def admit(
    items: Sequence[T],
    priority: Priority,
    target: Callable[[T], Target],
    breaker: Breaker,
    limiter: RateLimiter,
    *,
    min_breaker_defer: float = MIN_BREAKER_DEFER,
    min_rate_defer: float = MIN_RATE_DEFER,
) -> Admission[T]:
    """Route ``items`` (one lane's claim, so one priority) and take a rate token for each
    routed one, in order; those without a route or a token are deferred."""
    admission: Admission[T] = Admission()
    routed: list[tuple[T, str]] = []
    for item in items:
        where = target(item)
        chosen = route(
            where.channel, where.category, where.chain, breaker, min_defer=min_breaker_defer
        )
        if isinstance(chosen, Defer):
            admission.defer.append((item, chosen))
        else:
            routed.append((item, chosen.account))
    tokens = await ration(limiter, priority, Counter(account for _, account in routed))
    for item, account in routed:
        if tokens.get(account, 0) > 0:
            tokens[account] -= 1
            admission.send.append((item, account))
            continue
        breaker.cancel(account)  # a reserved half-open probe is not going out
        wait = max(limiter.next_token_in(account, priority), min_rate_defer)
        admission.defer.append((item, Defer(wait, "rate_limited", account)))
    return admission
