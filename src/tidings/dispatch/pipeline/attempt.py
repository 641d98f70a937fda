"""One attempt at one claimed delivery: call its provider, turn what happened into an Outcome."""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import partial
from typing import Any

from tidings.content.catalog import TemplateCatalog
from tidings.content.compose import NoTemplate, compose
from tidings.content.render import RenderError
from tidings.content.variables import template_variables
from tidings.dispatch.pipeline import observed
from tidings.dispatch.pipeline.deadlines import Deadlines
from tidings.dispatch.pipeline.send_starts import Begin
from tidings.dispatch.pipeline.types import TypeRules
from tidings.policy.preference_links import PreferenceLinks
from tidings.policy.unsubscribe import Unsubscribe, Unsubscriber
from tidings.priorities import Category, Channel, Priority
from tidings.providers.base import Content, EmailSender, Message, Provider, ProviderError
from tidings.states import FailureKind, Status
from tidings.store.claims import ClaimedDelivery
from tidings.store.outcomes import MAX_ERROR_LENGTH, Outcome
from tidings.store.users import UserProfile
from tidings.tracking.engagement_links import EngagementLinks
from tidings.tracking.html_links import tracked_links, with_open_pixel


@dataclass(frozen=True)
class Composer:
    """Builds the message of a claimed delivery: its rendered template (after the checks,
    before the provider: docs/architecture.md, Templates and rendering), its unsubscribe
    link and its user's preference center link."""

    templates: TemplateCatalog
    unsubscriber: Unsubscriber | None = None
    sms_max_segments: int = 10
    engagement: EngagementLinks | None = None
    preference_links: PreferenceLinks | None = None

    async def message(
        self, claimed: ClaimedDelivery, rules: TypeRules, profile: UserProfile | None
    ) -> tuple[Message, int | None]:
        """The message and the template version it was rendered with; ``RenderError``
        when it cannot be rendered (poison)."""
        headers, link = self._unsubscribe(claimed)
        context = template_variables(
            claimed.data, claimed.user_id, profile, claimed.locale, link, self._preferences(claimed)
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
            if claimed.channel == Channel.EMAIL.value and content.html:
                content = self._tracked(claimed, rules, content)
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
            inbound_at=claimed.inbound_at or {},
        )
        if claimed.channel == Channel.EMAIL.value:
            _email_details(message, rules.email or {}, claimed.email or {})
        return message, version

    def _tracked(self, claimed: ClaimedDelivery, rules: TypeRules, content: Content) -> Content:
        """The HTML part with its links and open pixel (docs/tracking.md), if the type asks."""
        links = self.engagement
        if links is None or not (rules.track_opens or rules.track_clicks) or not content.html:
            return content
        html = content.html
        if rules.track_clicks:
            html = tracked_links(html, partial(links.click_url, claimed.id), links.is_ours)
        if rules.track_opens:
            html = with_open_pixel(html, links.open_url(claimed.id))
        return replace(content, html=html)

    def _preferences(self, claimed: ClaimedDelivery) -> str | None:
        """The user's preference center, in a message of any category: only a user has one."""
        if self.preference_links is None or claimed.user_id is None:
            return None
        return self.preference_links.url(claimed.user_id)

    def _unsubscribe(self, claimed: ClaimedDelivery) -> tuple[dict[str, str], str | None]:
        """Every marketing message offers a way out; email also in its headers (RFC 8058).
        The link names the delivery, so that its unsubscribe counts in its reports."""
        if self.unsubscriber is None or claimed.category != Category.MARKETING.value:
            return {}, None
        request = Unsubscribe(
            claimed.category,
            claimed.channel,
            claimed.user_id,
            None if claimed.user_id else claimed.address,
            claimed.id,
        )
        headers = {}
        if claimed.channel == Channel.EMAIL.value:
            headers = self.unsubscriber.headers(request)
        return headers, self.unsubscriber.url(request)


def _email_details(message: Message, kind: Mapping[str, Any], own: Mapping[str, Any]) -> None:
    """The type's sender and reply-to, then the notification's own reply-to and copies."""
    if kind.get("fromAddress"):
        message.sender = EmailSender(kind["fromAddress"], kind.get("fromName"))
    message.reply_to = own.get("replyTo") or kind.get("replyTo")
    message.cc = tuple(own.get("cc") or ())
    message.bcc = tuple(own.get("bcc") or ())


@dataclass(frozen=True)
class Target:
    """Where one delivery goes: the provider, the account name its row records (else the
    provider's own), and whether an ambiguous outcome fails instead of being retried. How
    the call went is recorded on the outcome (``called``, ``call_error``), for the account's
    protection to hear (dispatch/protection/calls.py)."""

    provider: Provider
    account: str | None = None
    # The account's on_ambiguous is "fail": an ambiguous outcome is never retried.
    at_most_once: bool = False
    # For such an account: records that the call starts (dispatch/pipeline/send_starts.py),
    # so that a crash during the call ends the delivery ambiguous instead of sending it
    # again; refused (the start not recorded, the lease lost), the delivery is given back.
    begin: Begin | None = None


@dataclass(frozen=True)
class Failure:
    """A failed provider call, as the retry policy sees it."""

    kind: FailureKind
    error: str
    provider: str | None
    retry_after: float | None = None
    # The request may have reached the provider, and no answer says whether it was sent.
    ambiguous: bool = False


@dataclass(frozen=True)
class Sender:
    """What every send of one dispatcher shares: the composer, the provider timeout and
    the random source of the retry jitter."""

    composer: Composer
    send_timeout: float
    rng: random.Random
    # One timer per 50 ms of send deadlines, not one per send (dispatch/pipeline/deadlines.py).
    deadlines: Deadlines = field(default_factory=Deadlines)

    async def attempt(
        self,
        claimed: ClaimedDelivery,
        rules: TypeRules,
        target: Target,
        now: datetime,
        profile: UserProfile | None = None,
    ) -> Outcome:
        """Render, then call the target's provider; the outcome."""
        try:
            message, version = await self.composer.message(claimed, rules, profile)
        except RenderError as error:
            outcome = Outcome.failed(claimed, FailureKind.POISON, f"template: {error}")
        else:
            outcome = await self._send(claimed, message, rules, target, now)
            outcome.template_version = version
        return outcome

    async def _send(
        self,
        claimed: ClaimedDelivery,
        message: Message,
        rules: TypeRules,
        target: Target,
        now: datetime,
    ) -> Outcome:
        name = target.account or target.provider.name
        if target.begin is not None and (refused := await target.begin()) is not None:
            return Outcome.released(claimed, now, refused)
        try:
            with observed.provider_call(name, claimed.channel):
                async with self.deadlines.limit(self.send_timeout):
                    result = await target.provider.send(message)
        except ProviderError as error:
            failure = Failure(error.kind, str(error), name, error.retry_after, error.ambiguous)
            outcome = self.after_failure(claimed, rules, now, failure, target.at_most_once)
            if error.effect is not None and outcome.status is Status.FAILED:
                outcome.effect, outcome.effect_reason = error.effect, error.reason
                outcome.effect_at = error.effect_at
            return _heard(outcome, error)
        except TimeoutError as error:
            text = f"provider did not answer within {self.send_timeout:g}s"
            # The request may have reached the provider: whether it was sent is unknown.
            failure = Failure(FailureKind.TRANSIENT, text, name, ambiguous=True)
            return _heard(
                self.after_failure(claimed, rules, now, failure, target.at_most_once), error
            )
        except Exception as error:  # an adapter bug must not kill the lane: retry, then FAILED
            text = f"provider error {type(error).__name__}: {error}"
            failure = Failure(FailureKind.TRANSIENT, text, name)
            return _heard(self.after_failure(claimed, rules, now, failure), error)
        sent = Outcome.sent(claimed, target.account or result.provider, result.provider_msg_id, now)
        return _heard(sent, None)

    def after_failure(
        self,
        claimed: ClaimedDelivery,
        rules: TypeRules,
        now: datetime,
        failure: Failure,
        at_most_once: bool = False,
    ) -> Outcome:
        error = failure.error[:MAX_ERROR_LENGTH]
        kind, provider = failure.kind, failure.provider
        if failure.ambiguous and at_most_once:
            # Perhaps sent, perhaps not, to a provider without idempotency: a retry could
            # send it twice, which this account refuses (on_ambiguous = "fail").
            kind = FailureKind.AMBIGUOUS
        decision = rules.retry.decide(claimed.attempts, kind, now, self.rng, failure.retry_after)
        detail: dict[str, object] = {
            "attempt": claimed.attempts,
            "error": error,
            "kind": kind.value,
            "provider": provider,
        }
        if failure.ambiguous:
            detail["perhapsSent"] = True  # a retry may send it twice (on_ambiguous = retry)
        if decision.retry_at is not None:
            return Outcome.retry(claimed, decision.retry_at, error, provider, detail)
        assert decision.failure_kind is not None
        return Outcome.failed(claimed, decision.failure_kind, error, provider, detail)


def _heard(outcome: Outcome, error: BaseException | None) -> Outcome:
    """``outcome`` of a provider call that was made and raised ``error`` (None: accepted)."""
    outcome.called, outcome.call_error = True, error
    return outcome
