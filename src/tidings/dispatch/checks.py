"""Send-time checks: is a claimed delivery still wanted? (DESIGN.md §5)

Run once per claimed batch, before any provider is called, so that what changed since the
delivery was accepted (an address suppressed after a bounce or a complaint) applies to
what is already queued.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence

from tidings.dispatch.attempt import skipped
from tidings.dispatch.types import TypeRules
from tidings.policy.preferences import wanted
from tidings.policy.suppression import canonical_address
from tidings.store import preferences, suppressions
from tidings.store.claims import ClaimedDelivery, Outcome
from tidings.store.engine import Database


async def still_wanted(
    db: Database, claimed: Sequence[ClaimedDelivery], rules: Callable[[str], TypeRules]
) -> tuple[list[ClaimedDelivery], list[Outcome]]:
    """The deliveries to send, and the outcomes of those that must not be sent: switched
    off by the user since they were accepted, or to an address suppressed since."""
    reasons = await _switched_off(db, claimed, rules)
    pairs = {d.id: (d.channel, canonical_address(d.channel, d.address)) for d in claimed}
    found = await suppressions.suppressed(db, set(pairs.values()))
    for d in claimed:
        if d.id not in reasons and pairs[d.id] in found:
            reasons[d.id] = "suppressed"
    send = [d for d in claimed if d.id not in reasons]
    return send, [skipped(d, reasons[d.id]) for d in claimed if d.id in reasons]


async def _switched_off(
    db: Database, claimed: Sequence[ClaimedDelivery], rules: Callable[[str], TypeRules]
) -> dict[uuid.UUID, str]:
    chosen = await preferences.of_users(db, {d.user_id for d in claimed if d.user_id})
    return {
        d.id: "preference_off"
        for d in claimed
        if d.user_id in chosen
        and not wanted(chosen[d.user_id], d.category, d.channel, rules(d.type).required_channels)
    }
