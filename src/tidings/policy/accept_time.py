"""The accept-time policy that single sends and campaign expansion share (docs/architecture.md,
Policy check order): deliveries the user switched off, or to a suppressed address, are stored
as SKIPPED with the reason instead of PENDING."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from tidings.policy.preferences import wanted
from tidings.states import Status
from tidings.store import preferences, suppressions
from tidings.store.engine import Database
from tidings.store.intake import NotificationDraft
from tidings.store.suppressions import Pair, canonical_address

# Pairs per suppression query: two parameters each, under SQLite's 32,766.
SUPPRESSION_CHUNK = 10_000


async def skip_unwanted(
    db: Database,
    drafts: Sequence[NotificationDraft],
    required: Callable[[str], Collection[str]],
) -> None:
    """Mark what must not be sent; ``required(type)`` names the channels that cannot be
    switched off."""
    await skip_switched_off(db, drafts, required)
    await skip_suppressed(db, drafts)


async def skip_switched_off(
    db: Database,
    drafts: Sequence[NotificationDraft],
    required: Callable[[str], Collection[str]],
) -> None:
    chosen = await preferences.of_users(db, {d.user_id for d in drafts if d.user_id})
    for draft in drafts:
        if draft.user_id not in chosen:
            continue
        must = required(draft.type)
        for d in draft.deliveries:
            off = not wanted(chosen[draft.user_id], draft.category, d.channel, must)
            if d.status is Status.PENDING and off:
                d.status, d.skip_reason = Status.SKIPPED, "preference_off"


async def skip_suppressed(db: Database, drafts: Sequence[NotificationDraft]) -> None:
    pending = [
        (d, (d.channel, canonical_address(d.channel, d.address)))
        for draft in drafts
        for d in draft.deliveries
        if d.status is Status.PENDING
    ]
    pairs = list({pair for _, pair in pending})
    found: set[Pair] = set()
    for start in range(0, len(pairs), SUPPRESSION_CHUNK):
        found |= await suppressions.suppressed(db, pairs[start : start + SUPPRESSION_CHUNK])
    for delivery, pair in pending:
        if pair in found:
            delivery.status, delivery.skip_reason = Status.SKIPPED, "suppressed"
