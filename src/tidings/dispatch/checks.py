"""Send-time checks: is a claimed delivery still wanted, and wanted now? (DESIGN.md §5-6)

Run once per claimed batch, before any provider is called, so that what changed since the
delivery was accepted (an opt-out, an address suppressed after a bounce) applies to what is
already queued, and so that quiet hours are judged at the hour of sending.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from tidings.dispatch.attempt import deferred, skipped
from tidings.dispatch.types import TypeRules
from tidings.policy import quiet_hours
from tidings.policy.preferences import wanted
from tidings.policy.suppression import canonical_address
from tidings.store import preferences, registry, suppressions
from tidings.store.claims import ClaimedDelivery, Outcome
from tidings.store.engine import Database


@dataclass(frozen=True)
class SendTimeChecks:
    db: Database
    rules: Callable[[str], TypeRules]
    rng: random.Random
    quiet_jitter: float = 600.0  # seconds: not every phone buzzes at 08:00:00

    async def apply(
        self, claimed: Sequence[ClaimedDelivery], now: datetime
    ) -> tuple[list[ClaimedDelivery], list[Outcome]]:
        """The deliveries to send now, and the outcomes of the others."""
        reasons = await self._switched_off(claimed)
        reasons |= await self._suppressed([d for d in claimed if d.id not in reasons])
        outcomes = [skipped(d, reasons[d.id]) for d in claimed if d.id in reasons]
        wanted_now = [d for d in claimed if d.id not in reasons]
        until = await self._quiet(wanted_now, now)
        outcomes += [deferred(d, until[d.id], "quiet_hours") for d in wanted_now if d.id in until]
        return [d for d in wanted_now if d.id not in until], outcomes

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
        pairs = {d.id: (d.channel, canonical_address(d.channel, d.address)) for d in claimed}
        found = await suppressions.suppressed(self.db, set(pairs.values()))
        return {d.id: "suppressed" for d in claimed if pairs[d.id] in found}

    async def _quiet(
        self, claimed: Sequence[ClaimedDelivery], now: datetime
    ) -> dict[uuid.UUID, datetime]:
        """Deliveries inside their user's quiet hours, with when to try again."""
        eligible = [d for d in claimed if d.user_id and quiet_hours.applies(d.category, d.channel)]
        if not eligible:
            return {}
        profiles = await registry.get_users(self.db, {d.user_id for d in eligible if d.user_id})
        until: dict[uuid.UUID, datetime] = {}
        for d in eligible:
            profile = profiles.get(d.user_id or "")
            window = profile and profile["quiet_hours"]
            if not window or not profile or not profile["timezone"]:
                continue  # without a time zone there is no "night" to respect
            end = quiet_hours.quiet_until(now, profile["timezone"], window["from"], window["to"])
            if end is not None:
                until[d.id] = end + timedelta(seconds=self.rng.uniform(0, self.quiet_jitter))
        return until
