"""Send-time checks: is a claimed delivery still wanted, and wanted now? (docs/architecture.md,
Policy check order)

Run once per claimed batch, before any provider is called, so that what changed since the
delivery was accepted (an opt-out, an address suppressed after a bounce) applies to what is
already queued, and so that quiet hours are judged at the hour of sending.
"""

from __future__ import annotations

import logging
import random
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

from tidings.dispatch.pipeline.types import TypeRules
from tidings.policy import quiet_hours
from tidings.policy.preferences import wanted
from tidings.priorities import Category, Channel
from tidings.states import FailureKind
from tidings.store import frequency, preferences, suppressions, users, whatsapp_windows
from tidings.store.claims import ClaimedDelivery
from tidings.store.engine import Database
from tidings.store.outcomes import Outcome, reachable
from tidings.store.suppressions import canonical_address
from tidings.store.users import UserProfile

log = logging.getLogger(__name__)

TRANSACTIONAL = Category.TRANSACTIONAL.value
EMAIL = Channel.EMAIL.value
WHATSAPP = Channel.WHATSAPP.value
# Sends per user and category per local day (docs/architecture.md, Policy check order).
DEFAULT_CAPS: Mapping[str, int] = {Category.MARKETING.value: 3}


def precheck(claimed: ClaimedDelivery, rules: TypeRules, now: datetime) -> Outcome | None:
    """An outcome without calling the provider, when the delivery must not be sent: its
    attempts are used up, or its time to live is over. Run for each delivery before the
    batch's checks, so that those use up no frequency cap."""
    if claimed.attempts > rules.retry.max_attempts:
        # Only a crash or lost lease gets here: the attempts were used by dead workers.
        return Outcome.failed(
            claimed,
            FailureKind.EXHAUSTED,
            f"no attempts left after {claimed.attempts - 1} (lost leases)",
        )
    # A scheduled notification (a campaign's, one with sendAt) lives from when it is due.
    if expired(claimed.send_at or claimed.created_at, rules.ttl_seconds, now):
        return Outcome.expired(claimed, rules.ttl_seconds)
    return None


def expired(created_at: datetime, ttl_seconds: int | None, now: datetime) -> bool:
    """Whether a ttl has run out. Compared as a duration, never as ``created_at + ttl``: a
    ttl beyond the range of datetimes saturates (never expires) instead of overflowing."""
    return ttl_seconds is not None and (now - created_at).total_seconds() > ttl_seconds


@dataclass(frozen=True)
class Checked:
    send: list[ClaimedDelivery]
    outcomes: list[Outcome]
    profiles: dict[str, UserProfile]
    # Deliveries the checks cannot process (they raised): the pipeline fails them as
    # poison and logs where.
    raised: list[tuple[ClaimedDelivery, Exception]] = field(default_factory=list)


@dataclass(frozen=True)
class SendTimeChecks:
    db: Database
    rules: Callable[[str], TypeRules]
    rng: random.Random
    quiet_jitter: float = 600.0  # seconds: not every phone buzzes at 08:00:00
    caps: Mapping[str, int] = field(default_factory=lambda: dict(DEFAULT_CAPS))

    async def apply(
        self, claimed: Sequence[ClaimedDelivery], now: datetime
    ) -> tuple[list[ClaimedDelivery], list[Outcome]]:
        """The deliveries to send now, and the outcomes of the others."""
        checked = await self.run(claimed, now)
        return checked.send, checked.outcomes

    async def sort(self, claimed: Sequence[ClaimedDelivery], now: datetime, lane: str) -> Checked:
        """Each claimed delivery's fate before its send, in one call: ``precheck`` first
        (expired and exhausted ones use up no frequency cap), then the batch's checks; when
        those fail, each delivery's alone, and with the database away all are given back."""
        result = Checked([], [], {})
        ready = []
        for delivery in claimed:
            try:
                outcome = precheck(delivery, self.rules(delivery.type), now)
            except Exception as error:
                result.raised.append((delivery, error))
                continue
            if outcome is None:
                ready.append(delivery)
            else:
                result.outcomes.append(outcome)
        if not ready:
            return result
        try:
            checked = await self.run(ready, now)
        except Exception as error:
            log.warning("%s lane: send-time checks failed (%s)", lane, type(error).__name__)
            checked = await self._apart(ready, now)
        return Checked(
            checked.send,
            result.outcomes + checked.outcomes,
            checked.profiles,
            result.raised + checked.raised,
        )

    async def _apart(self, ready: list[ClaimedDelivery], now: datetime) -> Checked:
        """The checks of a batch that failed, run for each delivery alone: one the checks
        cannot process fails as poison, instead of failing its whole batch again and again.
        When the database is the trouble, the deliveries are given back for later."""
        if not await reachable(self.db):
            outcomes = [Outcome.released(d, now, "checks failed") for d in ready]
            return Checked([], outcomes, {})
        result = Checked([], [], {})
        for delivery in ready:
            try:
                checked = await self.run([delivery], now)
            except Exception as error:
                result.raised.append((delivery, error))
                continue
            result.send.extend(checked.send)
            result.outcomes.extend(checked.outcomes)
            result.profiles.update(checked.profiles)
        return result

    async def run(self, claimed: Sequence[ClaimedDelivery], now: datetime) -> Checked:
        reasons = await self._switched_off(claimed)
        reasons |= await self._suppressed([d for d in claimed if d.id not in reasons])
        outcomes = [Outcome.skipped(d, reasons[d.id]) for d in claimed if d.id in reasons]
        wanted = [d for d in claimed if d.id not in reasons]
        profiles = await self._profiles(wanted)
        await _whatsapp_windows(self.db, wanted)
        until = self._quiet(wanted, profiles, now)
        outcomes += [
            Outcome.deferred(d, until[d.id], "quiet_hours") for d in wanted if d.id in until
        ]
        # Counted last, as only what is sent now may use up a day's allowance.
        capped = await self._over_cap([d for d in wanted if d.id not in until], profiles, now)
        outcomes += [Outcome.skipped(d, "frequency_cap") for d in wanted if d.id in capped]
        send = [d for d in wanted if d.id not in until and d.id not in capped]
        return Checked(send, outcomes, profiles)

    async def _switched_off(self, claimed: Sequence[ClaimedDelivery]) -> dict[uuid.UUID, str]:
        chosen = await preferences.of_users(self.db, {d.user_id for d in claimed if d.user_id})
        return {
            d.id: "preference_off"
            for d in claimed
            if d.user_id in chosen
            and not wanted(
                chosen[d.user_id], d.category, d.channel, self.rules(d.type).required_channels
            )
        }

    async def _suppressed(self, claimed: Sequence[ClaimedDelivery]) -> dict[uuid.UUID, str]:
        """Deliveries to a suppressed address; an email's suppressed copies (cc, bcc) are
        dropped from it (one query for both)."""
        pairs = {d.id: (d.channel, canonical_address(d.channel, d.address)) for d in claimed}
        copies = {(EMAIL, canonical_address(EMAIL, a)) for d in claimed for a in _copies(d)}
        found = await suppressions.suppressed(self.db, set(pairs.values()) | copies)
        if copies & found:
            for d in claimed:
                _drop_suppressed_copies(d, found)
        return {d.id: "suppressed" for d in claimed if pairs[d.id] in found}

    async def _profiles(self, claimed: Sequence[ClaimedDelivery]) -> dict[str, UserProfile]:
        """The users' profiles: for quiet hours, caps, and what templates say of them."""
        ids = {d.user_id for d in claimed if d.user_id}
        return await users.get_users(self.db, ids)

    def _quiet(
        self,
        claimed: Sequence[ClaimedDelivery],
        profiles: Mapping[str, UserProfile],
        now: datetime,
    ) -> dict[uuid.UUID, datetime]:
        """Deliveries inside their user's quiet hours, with when to try again."""
        eligible = [d for d in claimed if d.user_id and quiet_hours.applies(d.category, d.channel)]
        until: dict[uuid.UUID, datetime] = {}
        for d in eligible:
            profile = profiles.get(d.user_id or "")
            window = profile.quiet_hours if profile else None
            if not window or not profile or not profile.timezone:
                continue  # without a time zone there is no "night" to respect
            end = quiet_hours.quiet_until(now, profile.timezone, window["from"], window["to"])
            if end is not None:
                until[d.id] = end + timedelta(seconds=self.rng.uniform(0, self.quiet_jitter))
        return until

    async def _over_cap(
        self,
        claimed: Sequence[ClaimedDelivery],
        profiles: Mapping[str, UserProfile],
        now: datetime,
    ) -> set[uuid.UUID]:
        """Deliveries beyond their user's daily cap for the category (the rest are counted)."""
        capped = [
            d
            for d in claimed
            if d.user_id and d.category in self.caps and d.category != TRANSACTIONAL
        ]
        if not capped:
            return set()
        sends = [
            (
                d.user_id or "",
                d.category,
                _local_day(now, profiles.get(d.user_id or "")),
                self.caps[d.category],
            )
            for d in capped
        ]
        counted = await frequency.count_sends(self.db, sends)
        return {d.id for d, ok in zip(capped, counted, strict=True) if not ok}


async def _whatsapp_windows(db: Database, claimed: Sequence[ClaimedDelivery]) -> None:
    """Each whatsapp delivery's number: when it last wrote to each account (one query), for
    the adapters to refuse free text outside the 24-hour window before calling."""
    numbers = {d.address for d in claimed if d.channel == WHATSAPP}
    if not numbers:
        return
    found = await whatsapp_windows.last_inbound(db, numbers)
    for d in claimed:
        if d.channel == WHATSAPP:
            d.inbound_at = found.get(d.address, {})


def _copies(delivery: ClaimedDelivery) -> list[str]:
    details = delivery.email if delivery.channel == EMAIL else None
    return [*(details.get("cc") or []), *(details.get("bcc") or [])] if details else []


def _drop_suppressed_copies(delivery: ClaimedDelivery, found: set[tuple[str, str]]) -> None:
    if not delivery.email:
        return
    kept = dict(delivery.email)
    for field_name in ("cc", "bcc"):
        if kept.get(field_name):
            kept[field_name] = [
                a for a in kept[field_name] if (EMAIL, canonical_address(EMAIL, a)) not in found
            ]
    delivery.email = kept


def _local_day(now: datetime, profile: UserProfile | None) -> date:
    zone = profile.timezone if profile else None
    return now.astimezone(ZoneInfo(zone)).date() if zone else now.date()
