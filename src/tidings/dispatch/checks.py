"""Send-time checks: is a claimed delivery still wanted? (DESIGN.md §5)

Run once per claimed batch, before any provider is called, so that what changed since the
delivery was accepted (an address suppressed after a bounce or a complaint) applies to
what is already queued.
"""

from __future__ import annotations

from collections.abc import Sequence

from tidings.dispatch.attempt import skipped
from tidings.policy.suppression import canonical_address
from tidings.store import suppressions
from tidings.store.claims import ClaimedDelivery, Outcome
from tidings.store.engine import Database


async def still_wanted(
    db: Database, claimed: Sequence[ClaimedDelivery]
) -> tuple[list[ClaimedDelivery], list[Outcome]]:
    """The deliveries to send, and the outcomes of those that must not be sent."""
    pairs = {d.id: (d.channel, canonical_address(d.channel, d.address)) for d in claimed}
    found = await suppressions.suppressed(db, set(pairs.values()))
    if not found:
        return list(claimed), []
    send = [d for d in claimed if pairs[d.id] not in found]
    dropped = [skipped(d, "suppressed") for d in claimed if pairs[d.id] in found]
    return send, dropped
