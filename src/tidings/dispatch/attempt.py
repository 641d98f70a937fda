"""One attempt at one claimed delivery: call its provider, turn what happened into an Outcome."""

from __future__ import annotations

import asyncio
import random
from datetime import datetime, timedelta
from typing import Any

from tidings.dispatch.types import TypeRules
from tidings.policy.unsubscribe import Unsubscribe, Unsubscriber
from tidings.priorities import Category, Channel, Priority
from tidings.providers.base import Message, Provider, ProviderError
from tidings.states import FailureKind, Status
from tidings.store.claims import ClaimedDelivery, Outcome

MAX_ERROR_LENGTH = 1000


def message_for(claimed: ClaimedDelivery, unsubscriber: Unsubscriber | None = None) -> Message:
    headers: dict[str, str] = {}
    link = None
    if unsubscriber is not None and claimed.category == Category.MARKETING.value:
        # Every marketing message offers a way out; email also in its headers (RFC 8058).
        request = Unsubscribe(
            claimed.category,
            claimed.channel,
            claimed.user_id,
            None if claimed.user_id else claimed.address,
        )
        link = unsubscriber.url(request)
        if claimed.channel == Channel.EMAIL.value:
            headers = unsubscriber.headers(request)
    return Message(
        delivery_id=claimed.id,
        notification_id=claimed.notification_id,
        channel=Channel(claimed.channel),
        address=claimed.address,
        type=claimed.type,
        priority=Priority(claimed.priority),
        data=claimed.data,
        locale=claimed.locale,
        user_id=claimed.user_id,
        attempt=claimed.attempts,
        headers=headers,
        unsubscribe_url=link,
    )


def precheck(claimed: ClaimedDelivery, rules: TypeRules, now: datetime) -> Outcome | None:
    """An outcome without calling the provider, when the delivery must not be sent."""
    if claimed.attempts > rules.retry.max_attempts:
        # Only a crash or lost lease gets here: the attempts were used by dead workers.
        return failed(
            claimed,
            FailureKind.EXHAUSTED,
            f"no attempts left after {claimed.attempts - 1} (lost leases)",
        )
    if rules.ttl_seconds is not None and now > claimed.created_at + timedelta(
        seconds=rules.ttl_seconds
    ):
        return Outcome(
            claimed.id,
            claimed.attempts,
            Status.EXPIRED,
            claimed.attempts,
            event="expired",
            event_detail={"ttl": rules.ttl_seconds},
        )
    return None


async def attempt(
    claimed: ClaimedDelivery,
    provider: Provider,
    rules: TypeRules,
    send_timeout: float,
    rng: random.Random,
    now: datetime,
    unsubscriber: Unsubscriber | None = None,
) -> Outcome:
    try:
        async with asyncio.timeout(send_timeout):
            result = await provider.send(message_for(claimed, unsubscriber))
    except ProviderError as error:
        return after_failure(
            claimed, rules, error.kind, str(error), rng, now, error.retry_after, provider.name
        )
    except TimeoutError:
        return after_failure(
            claimed,
            rules,
            FailureKind.TRANSIENT,
            f"provider did not answer within {send_timeout:g}s",
            rng,
            now,
            None,
            provider.name,
        )
    except Exception as error:  # an adapter bug must not kill the lane: retry, then FAILED
        return after_failure(
            claimed,
            rules,
            FailureKind.TRANSIENT,
            f"provider error {type(error).__name__}: {error}",
            rng,
            now,
            None,
            provider.name,
        )
    return Outcome(
        claimed.id,
        claimed.attempts,
        Status.SENT,
        claimed.attempts,
        provider=result.provider,
        provider_msg_id=result.provider_msg_id,
        sent_at=now,
    )


def after_failure(
    claimed: ClaimedDelivery,
    rules: TypeRules,
    kind: FailureKind,
    error: str,
    rng: random.Random,
    now: datetime,
    retry_after: float | None,
    provider: str | None,
) -> Outcome:
    error = error[:MAX_ERROR_LENGTH]
    decision = rules.retry.decide(claimed.attempts, kind, now, rng, retry_after)
    detail = {"attempt": claimed.attempts, "error": error, "kind": kind.value, "provider": provider}
    if decision.retry_at is not None:
        return Outcome(
            claimed.id,
            claimed.attempts,
            Status.PENDING,
            claimed.attempts,
            next_attempt_at=decision.retry_at,
            last_error=error,
            provider=provider,
            event="retry_scheduled",
            event_detail=detail | {"retryAt": decision.retry_at.isoformat()},
        )
    assert decision.failure_kind is not None
    return failed(claimed, decision.failure_kind, error, provider, detail)


def failed(
    claimed: ClaimedDelivery,
    kind: FailureKind,
    error: str,
    provider: str | None = None,
    detail: dict[str, object] | None = None,
) -> Outcome:
    return Outcome(
        claimed.id,
        claimed.attempts,
        Status.FAILED,
        claimed.attempts,
        last_error=error,
        failure_kind=kind.value,
        provider=provider,
        event="failed",
        event_detail=(detail or {}) | {"failureKind": kind.value},
    )


def released(claimed: ClaimedDelivery, now: datetime, reason: str) -> Outcome:
    """Give the delivery back without counting the attempt (shutdown, deferral)."""
    return _uncounted(claimed, Status.PENDING, "released", reason, next_attempt_at=now)


def deferred(claimed: ClaimedDelivery, until: datetime, reason: str) -> Outcome:
    """Not now (quiet hours, later a rate limit): back to PENDING until ``until``, the
    attempt given back, for it is nobody's failure."""
    return _uncounted(claimed, Status.PENDING, "deferred", reason, next_attempt_at=until)


def skipped(claimed: ClaimedDelivery, reason: str) -> Outcome:
    """Not to be sent after all (a send-time policy check); no provider was called."""
    return _uncounted(claimed, Status.SKIPPED, "skipped", reason, skip_reason=reason)


def _uncounted(
    claimed: ClaimedDelivery, status: Status, event: str, reason: str, **fields: Any
) -> Outcome:
    """An outcome that gives the claimed attempt back."""
    return Outcome(
        claimed.id,
        claimed.attempts,
        status,
        claimed.attempts - 1,
        event=event,
        event_detail={"reason": reason},
        **fields,
    )
