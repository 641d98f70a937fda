"""Campaigns read back for the API and the dashboard: one of a namespace's, and its newest
a page at a time."""

from __future__ import annotations

import uuid
from datetime import datetime

from tidings.store import campaigns as store
from tidings.store.audiences import PROFILE_FIELDS
from tidings.store.campaigns import Campaign, CampaignStatus
from tidings.store.engine import Database

__all__ = ["PROFILE_FIELDS", "Campaign", "CampaignStatus", "newest", "of_namespace"]


async def of_namespace(db: Database, namespace: str, campaign_id: uuid.UUID) -> Campaign | None:
    """The campaign, if it is ``namespace``'s (another's is as unknown as a made-up id)."""
    found = await store.get(db, campaign_id)
    return found if found is not None and found.namespace == namespace else None


async def newest(
    db: Database, namespace: str, limit: int, before: tuple[datetime, uuid.UUID] | None = None
) -> list[Campaign]:
    """A namespace's campaigns, newest first, after the page that ended at ``before``."""
    return await store.newest(db, namespace, limit, before)
