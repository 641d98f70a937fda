"""One attempt at one claimed delivery: call its provider, turn what happened into an Outcome."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from tidings.content.catalog import TemplateCatalog
from tidings.content.compose import NoTemplate, compose, variables
from tidings.content.render import RenderError
from tidings.dispatch.types import TypeRules
from tidings.policy.unsubscribe import Unsubscribe, Unsubscriber
from tidings.priorities import Category, Channel, Priority
from tidings.providers.base import Content, Message, Provider, ProviderError
from tidings.states import FailureKind, Status
from tidings.store.claims import ClaimedDelivery, Outcome

MAX_ERROR_LENGTH = 1000


@dataclass(frozen=True)
class Composer:
    """Builds the message of a claimed delivery: its rendered template (docs/architecture.md,
    Templates and rendering:
    render after the checks, before the provider) and its unsubscribe link."""

    templates: TemplateCatalog
    unsubscriber: Unsubscriber | None = None
    sms_max_segments: int = 10

    async def message(
        self, claimed: ClaimedDelivery, rules: TypeRules, profile: dict[str, Any] | None
    ) -> tuple[Message, int | None]:
        """The message and the template version it was rendered with; ``RenderError``
        when it cannot be rendered (poison)."""
        headers, link = self._unsubscribe(claimed)
        context = variables(
            claimed.data, user=_user(claimed, profile), locale=claimed.locale, unsubscribe_url=link
        )
        try:
            rendered = await compose(
                self.templates,
                claimed.type,
                claimed.channel,
                claimed.locale,
                rules.default_locale,
                context,
                self.sms_max_segments,
            )
            content, version = rendered.content, rendered.template.version
        except NoTemplate:
            if claimed.channel != Channel.WEBHOOK.value:
                raise
            # A webhook type without a template sends the notification's data as is.
            content, version = Content(), None
        message = Message(
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
            content=content,
            category=claimed.category,
            ttl_seconds=rules.ttl_seconds,
            collapse_key=rules.collapse_key,
        )
        return message, version

    def _unsubscribe(self, claimed: ClaimedDelivery) -> tuple[dict[str, str], str | None]:
        """Every marketing message offers a way out; email also in its headers (RFC 8058)."""
        if self.unsubscriber is None or claimed.category != Category.MARKETING.value:
            return {}, None
        request = Unsubscribe(
            claimed.category,
            claimed.channel,
            claimed.user_id,
            None if claimed.user_id else claimed.address,
        )
        headers = {}
        if claimed.channel == Channel.EMAIL.value:
            headers = self.unsubscriber.headers(request)
        return headers, self.unsubscriber.url(request)


def _user(claimed: ClaimedDelivery, profile: dict[str, Any] | None) -> dict[str, Any] | None:
    if claimed.user_id is None:
        return None
    profile = profile or {}
    return {
        "id": claimed.user_id,
        "locale": profile.get("locale"),
        "timezone": profile.get("timezone"),
        **(profile.get("attributes") or {}),
    }


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


# Told what the provider call did (None: it succeeded): the circuit breaker listens.
Report = Callable[[BaseException | None], None]


async def attempt(
    claimed: ClaimedDelivery,
    provider: Provider,
    rules: TypeRules,
    send_timeout: float,
    rng: random.Random,
    now: datetime,
    composer: Composer,
    profile: dict[str, Any] | None = None,
    report: Report | None = None,
    account: str | None = None,
) -> Outcome:
    """Render, then call ``provider`` (recorded as ``account``, else as the provider says)."""
    try:
        message, version = await composer.message(claimed, rules, profile)
    except RenderError as error:
        return failed(claimed, FailureKind.POISON, f"template: {error}")
    outcome = await _send(
        claimed, message, provider, account, rules, send_timeout, rng, now, report
    )
    outcome.template_version = version
    return outcome


async def _send(
    claimed: ClaimedDelivery,
    message: Message,
    provider: Provider,
    account: str | None,
    rules: TypeRules,
    send_timeout: float,
    rng: random.Random,
    now: datetime,
    report: Report | None,
) -> Outcome:
    report = report or _ignore
    name = account or provider.name
    try:
        async with asyncio.timeout(send_timeout):
            result = await provider.send(message)
    except ProviderError as error:
        report(error)
        outcome = after_failure(
            claimed, rules, error.kind, str(error), rng, now, error.retry_after, name
        )
        if error.effect is not None and outcome.status is Status.FAILED:
            outcome.effect, outcome.effect_reason = error.effect.value, error.reason
        return outcome
    except TimeoutError as error:
        report(error)
        return after_failure(
            claimed,
            rules,
            FailureKind.TRANSIENT,
            f"provider did not answer within {send_timeout:g}s",
            rng,
            now,
            None,
            name,
        )
    except Exception as error:  # an adapter bug must not kill the lane: retry, then FAILED
        report(error)
        return after_failure(
            claimed,
            rules,
            FailureKind.TRANSIENT,
            f"provider error {type(error).__name__}: {error}",
            rng,
            now,
            None,
            name,
        )
    report(None)
    return Outcome(
        claimed.id,
        claimed.attempts,
        Status.SENT,
        claimed.attempts,
        provider=account or result.provider,
        provider_msg_id=result.provider_msg_id,
        sent_at=now,
    )


def _ignore(error: BaseException | None) -> None:
    return None


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
