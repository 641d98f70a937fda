"""Campaigns read back for the API and the dashboard: one of a namespace's, and its newest
a page at a time; and the resume of a paused one, which answers it read back."""

from __future__ import annotations

import uuid
from datetime import datetime

from tidings.store import campaign_pause
from tidings.store import campaigns as store
from tidings.store.audiences import PROFILE_FIELDS
from tidings.store.campaigns import Campaign, CampaignStatus
from tidings.store.engine import Database

__all__ = [
    "PROFILE_FIELDS",
    "Campaign",
    "CampaignStatus",
    "newest",
    "of_namespace",
    "resume",
]


async def of_namespace(db: Database, namespace: str, campaign_id: uuid.UUID) -> Campaign | None:
    """The campaign, if it is ``namespace``'s (another's is as unknown as a made-up id)."""
    found = await store.get(db, campaign_id)
    return found if found is not None and found.namespace == namespace else None


async def newest(
    db: Database, namespace: str, limit: int, before: tuple[datetime, uuid.UUID] | None = None
) -> list[Campaign]:
    """A namespace's campaigns, newest first, after the page that ended at ``before``."""
    return await store.newest(db, namespace, limit, before)


async def resume(db: Database, campaign_id: uuid.UUID, now: datetime) -> Campaign | None:
    """Resume a campaign its reputation guard paused (campaigns/reputation.py): its held
    deliveries are due now. Any other campaign is answered as it is."""
    return await campaign_pause.resume(db, campaign_id, now)
