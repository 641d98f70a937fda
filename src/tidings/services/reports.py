"""Reports (docs/events.md, Reports): the counters the dispatchers keep, summed over a
campaign or over a type's days."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import date

from tidings.campaigns.reads import of_namespace
from tidings.store import reports
from tidings.store.engine import Database
from tidings.store.types import get_type


async def of_campaign(
    db: Database, namespace: str, campaign_id: uuid.UUID
) -> dict[str, int] | None:
    """The campaign's counters by name (``sent``, ``skipped:<reason>``...); None when the
    namespace has no such campaign."""
    if await of_namespace(db, namespace, campaign_id) is None:
        return None
    return await reports.counters(db, [reports.campaign_scope(campaign_id)])


async def of_type(
    db: Database, namespace: str, name: str, days: Sequence[date]
) -> dict[str, int] | None:
    """The type's counters over ``days`` in the namespace; None when there is no such type."""
    if await get_type(db, name) is None:
        return None
    return await reports.counters(db, [reports.type_scope(namespace, name, day) for day in days])
