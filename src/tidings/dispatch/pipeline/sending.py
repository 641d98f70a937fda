"""Sending what a lane has claimed: the send-time checks, the account and its rate token,
the provider call behind the fleet's dedup key, and the outcome. Both transports use it:
the direct lanes (dispatch/lanes/direct.py) and the Kafka workers' lanes (dispatch/lanes/kafka.py)
differ only in how they claim.
"""

from __future__ import annotations

import asyncio
import logging
import random
import traceback
import uuid
from dataclasses import dataclass
from datetime import timedelta
from functools import partial

from tidings import logs
from tidings.clock import utcnow
from tidings.dispatch.lanes.progress import LaneProgress
from tidings.dispatch.pipeline import observed
from tidings.dispatch.pipeline.attempt import Sender, Target
from tidings.dispatch.pipeline.outcomes import OutcomeWriter
from tidings.dispatch.pipeline.send_checks import SendTimeChecks
from tidings.dispatch.pipeline.send_starts import SendStarts
from tidings.dispatch.pipeline.types import TypeRulebook
from tidings.dispatch.protection.calls import ProtectedCalls
from tidings.dispatch.protection.deactivation_guard import HELD
from tidings.dispatch.protection.guard_outcomes import held
from tidings.dispatch.protection.protection import Protection
from tidings.dispatch.protection.redis_guards import Dedup, send_once
from tidings.priorities import Channel, Priority
from tidings.providers.chains import ProviderSet
from tidings.states import Status
from tidings.store import users
from tidings.store.campaigns import CancelledCampaigns
from tidings.store.claims import ClaimedDelivery
from tidings.store.engine import Database
from tidings.store.outcomes import Outcome
from tidings.store.users import UserProfile
from tidings.store.wakeup import Wakeup

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LaneContext:
    """What every lane of one dispatcher shares."""

    db: Database
    providers: ProviderSet
    writer: OutcomeWriter
    types: TypeRulebook
    wakeup: Wakeup
    lease_seconds: float
    rng: random.Random
    checks: SendTimeChecks
    sender: Sender
    protection: Protection
    # Each admitted send in its account's slot, and what its call did told to the account.
    calls: ProtectedCalls
    cancelled: CancelledCampaigns
    dedup: Dedup
    # Start marks of at-most-once sends, group-committed across the dispatcher's lanes.
    starts: SendStarts


class SendPipeline:
    """The sends of one priority: each claimed delivery runs as a task of its own."""

    def __init__(self, priority: Priority, context: LaneContext) -> None:
        self.priority = priority
        self.context = context
        self._tasks: dict[asyncio.Task[None], str] = {}  # each send's channel
        self.slot_freed = asyncio.Event()
        # What the lane did, for its stall watch and reports (dispatch/lanes/progress.py).
        self.progress = LaneProgress(priority.value, "direct")
        # Deliveries whose at-most-once provider call has started (its mark is written).
        self._started: set[uuid.UUID] = set()

    @property
    def in_flight(self) -> int:
        return len(self._tasks)

    def in_flight_of(self, channel: str) -> int:
        return sum(1 for c in self._tasks.values() if c == channel)

    async def process(
        self, claimed: list[ClaimedDelivery]
    ) -> list[tuple[ClaimedDelivery, asyncio.Task[None]]]:
        """Check, admit and start the sends of ``claimed``: the sends started. Every other
        delivery's outcome is with the writer when this returns."""
        send, profiles = await self._still_wanted(claimed)
        return [
            (delivery, self._start(delivery, profiles.get(delivery.user_id or ""), account))
            for delivery, account in await self._admit(send)
        ]

    async def _still_wanted(
        self, claimed: list[ClaimedDelivery]
    ) -> tuple[list[ClaimedDelivery], dict[str, UserProfile]]:
        """Those to send, by the send-time checks; the others' outcomes go to the writer."""
        keep = self._drop_cancelled(claimed)
        if not keep:
            return [], {}
        checked = await self.context.checks.sort(keep, utcnow(), self.priority.value)
        for delivery, error in checked.raised:
            self._put(delivery, self._poisoned(delivery, error))
        by_id = {delivery.id: delivery for delivery in keep}
        for outcome in checked.outcomes:
            self._put(by_id.get(outcome.delivery_id), outcome)
        return checked.send, checked.profiles

    def _drop_cancelled(self, claimed: list[ClaimedDelivery]) -> list[ClaimedDelivery]:
        """Deliveries of a campaign cancelled since they were due become CANCELLED; those
        of a paused one are given back (``_stopped``)."""
        keep = []
        for delivery in claimed:
            stopped = _stopped(self.context.cancelled, delivery)
            if stopped is not None:
                self._put(delivery, stopped)
            else:
                keep.append(delivery)
        return keep

    def _put(self, delivery: ClaimedDelivery | None, outcome: Outcome) -> None:
        """To the writer, counted on the way (dispatch/pipeline/observed.py)."""
        self.context.writer.put(outcome)
        self.progress.outcome(outcome.status is Status.SENT)
        if delivery is not None:
            observed.outcome(delivery, outcome)
            _log_outcome(delivery, outcome)

    def _poisoned(self, delivery: ClaimedDelivery, error: BaseException) -> Outcome:
        """The guard's verdict on a delivery whose processing raised: FAILED as poison, the
        error kept on the row; the log has the delivery id and where, never the message."""
        log.error(
            "%s lane: delivery %s cannot be processed (%s); failed as poison\n%s",
            self.priority.value,
            delivery.id,
            error_name(error),
            error_where(error),
            extra=delivery_fields(delivery),
        )
        return Outcome.poisoned(delivery, error)

    async def _admit(self, send: list[ClaimedDelivery]) -> list[tuple[ClaimedDelivery, str]]:
        """Choose each delivery's account (breakers, failover) and take its rate token;
        those that must wait go back to PENDING without using an attempt."""
        if not send:
            return []
        try:
            platforms = await self._platforms(send)
        except Exception:
            # Guessing a token's platform could send it to the wrong provider: wait.
            log.exception("%s lane: reading device platforms failed; releasing", self.priority)
            for delivery in send:
                self.context.writer.put(Outcome.released(delivery, utcnow(), "platforms unknown"))
            return []
        self.progress.asked(len(send))
        admission = await self.context.protection.admit(send, self.priority, platforms)
        now = utcnow()
        for delivery, wait in admission.defer:
            # A little jitter, so deferred rows do not all come back in the same instant.
            until = now + timedelta(seconds=wait.until_seconds * self.context.rng.uniform(1, 1.2))
            if wait.reason == HELD and wait.account is not None:
                self._put(delivery, held(delivery, until, wait.account))
            else:
                self._put(delivery, Outcome.deferred(delivery, until, wait.reason))
        return admission.send

    async def _platforms(self, send: list[ClaimedDelivery]) -> dict[str, str]:
        """Push tokens' platforms, when a platform has a push chain of its own."""
        if not self.context.providers.routes_by_platform:
            return {}
        tokens = {d.address for d in send if d.channel == Channel.PUSH.value}
        return await users.platforms(self.context.db, tokens)

    def _start(
        self, delivery: ClaimedDelivery, profile: UserProfile | None, account: str
    ) -> asyncio.Task[None]:
        task = asyncio.create_task(self._send(delivery, profile, account))
        self._tasks[task] = delivery.channel
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._tasks.pop(task, None)
        self.slot_freed.set()

    async def _send(
        self, delivery: ClaimedDelivery, profile: UserProfile | None, account: str
    ) -> None:
        """The whole processing of one claimed delivery, under the guard: whatever it raises
        (a template that recurses without end, an absurd stored setting, a bug) fails this
        delivery as poison, and the lane goes on."""
        # Every line logged while sending, down in the provider too, names the delivery (the
        # task runs in a copy of the lane's context: this binds it for the send alone).
        logs.bind_lazily(lambda: {**delivery_fields(delivery), "account": account})
        context = self.context
        providers = context.providers
        recorded = providers.recorded_name(account)
        try:
            rules = context.types.rules(delivery.type)
            at_most_once = providers.at_most_once(account)
            begin = None
            if at_most_once:
                begin = context.starts.begin(delivery, recorded or account, self._started)
            target = Target(providers.providers[account], recorded, at_most_once, begin)
            attempt = partial(context.sender.attempt, delivery, rules, target, profile=profile)
            outcome = await context.calls.run(
                delivery,
                account,
                partial(send_once, context.dedup, delivery, attempt),
                partial(_stopped, context.cancelled, delivery),  # while it waited for a slot
            )
        except asyncio.CancelledError:
            # Shut down mid-send: give the delivery back without counting the attempt,
            # unless an at-most-once provider call had started (perhaps sent).
            if delivery.id in self._started:
                context.writer.put(Outcome.interrupted(delivery, recorded or account))
            else:
                context.writer.put(Outcome.released(delivery, utcnow(), "shutdown"))
            raise
        except Exception as error:
            outcome = self._poisoned(delivery, error)
        finally:
            self._started.discard(delivery.id)
        self._put(delivery, outcome)

    async def drain(self, grace: float) -> None:
        """Wait up to ``grace`` seconds for in-flight sends, then cancel (release) the rest."""
        if not self._tasks:
            return
        _done, pending = await asyncio.wait(set(self._tasks), timeout=grace)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending)


def delivery_fields(delivery: ClaimedDelivery) -> dict[str, object]:
    """What a log line about ``delivery`` carries: ids, never its address or content."""
    return {
        "request_id": delivery.request_id,
        "notification_id": delivery.notification_id,
        "delivery_id": delivery.id,
        "campaign_id": delivery.campaign_id,
        "channel": delivery.channel,
    }


def _log_outcome(delivery: ClaimedDelivery, outcome: Outcome) -> None:
    """A line per outcome, a failure at INFO and the others at DEBUG: its kind, reason and
    account, never the error's text (it can quote the provider's answer, address and all)."""
    level = logging.INFO if outcome.status is Status.FAILED else logging.DEBUG
    if not log.isEnabledFor(level):
        return
    kind = outcome.failure_kind.value if outcome.failure_kind is not None else None
    reason = (outcome.event_detail or {}).get("reason")
    event = outcome.event if outcome.event != "failed" else None  # the status says it
    why = ", ".join(str(part) for part in (event, kind, reason) if part)
    log.log(
        level,
        "%s delivery %s after attempt %d%s%s",
        delivery.channel,
        outcome.status.value,
        outcome.claimed_attempts,
        f" ({why})" if why else "",
        f" via {outcome.provider}" if outcome.provider else "",
        extra={
            **delivery_fields(delivery),
            "account": outcome.provider,
            "status": outcome.status.value,
            "failure_kind": kind,
            "reason": reason,
        },
    )


def error_name(error: BaseException) -> str:
    """An error's type only: its text may quote the message or an address."""
    return type(error).__name__


def error_where(error: BaseException) -> str:
    """The innermost frames of its traceback: code locations, none of the error's text."""
    return "".join(traceback.format_tb(error.__traceback__)[-3:])


# A claimed delivery of a paused campaign is due again this much later, not at once: by then
# the reputation guard's round (campaigns.reputation_interval, 5 s) has held it (HOLD) if
# the campaign is still paused, and a resume meanwhile finds it PENDING and sends it.
PAUSED_RECHECK = timedelta(seconds=5)


def _stopped(known: CancelledCampaigns, delivery: ClaimedDelivery) -> Outcome | None:
    """The outcome of a claimed delivery whose campaign stopped since it was due: CANCELLED
    for a cancel; for a pause, back to PENDING with its attempt given back (never held here:
    a resume racing this write would miss a delivery held after it, the guard's round holds
    under the campaign's lock); None to send it."""
    campaign_id = delivery.campaign_id
    if campaign_id is None:
        return None
    if campaign_id in known:
        return Outcome.cancelled(delivery)
    if campaign_id in known.paused:
        return Outcome.deferred(delivery, utcnow() + PAUSED_RECHECK, "campaign_paused")
    return None
