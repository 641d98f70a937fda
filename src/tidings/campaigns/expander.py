"""The expander: the part of every dispatcher that claims due campaigns and turns their
audience into deliveries, one page per transaction (docs/architecture.md, Campaigns).

A page's notifications, deliveries and the campaign's cursor are committed together, under
the expander's fence, so a process killed mid-page leaves nothing of that page; whoever takes
the campaign over after its lease resumes at the stored cursor: no user skipped, none twice
(and the idempotency keys ``campaign:<id>:<user>`` would refuse a second row anyway).
"""

from __future__ import annotations

import asyncio
import logging
import random
from datetime import timedelta

from tidings.campaigns.expansion import Planner, page_drafts
from tidings.campaigns.planning import spread_seconds
from tidings.campaigns.reputation import ReputationGuard
from tidings.campaigns.settings import CampaignSettings
from tidings.clock import utcnow
from tidings.priorities import Priority
from tidings.store import audiences
from tidings.store import campaigns as store
from tidings.store.campaigns import Campaign, PageOfExpansion
from tidings.store.engine import Database
from tidings.store.types import TypeCatalog
from tidings.store.wakeup import Wakeup

log = logging.getLogger(__name__)


class Expander:
    def __init__(
        self,
        db: Database,
        types: TypeCatalog,
        wakeup: Wakeup,
        settings: CampaignSettings,
        name: str,
        rng: random.Random | None = None,
    ) -> None:
        self.db = db
        self.types = types
        self.wakeup = wakeup
        self.settings = settings
        self.name = name
        self.rng = rng or random.Random()
        self.guard = ReputationGuard(db, settings)

    async def run(self, stop: asyncio.Event) -> None:
        """Expand due campaigns, mark finished ones DONE and pause those over a reputation
        limit (campaigns/reputation.py) until ``stop``."""
        while not stop.is_set():
            expanded = False
            try:
                expanded = await self.step()
                await store.finish_sent(self.db, utcnow())
                await self.guard.maybe_check(utcnow())
            except Exception:
                log.exception("campaign expansion failed; trying again")
            if not expanded:
                try:
                    await asyncio.wait_for(stop.wait(), self.settings.poll_interval)
                except TimeoutError:
                    pass

    async def step(self) -> bool:
        """Claim one due campaign and expand it to the end; False when none was due."""
        now = utcnow()
        lease = now + timedelta(seconds=self.settings.lease_seconds)
        campaign = await store.claim_due(self.db, self.name, now, lease)
        if campaign is None:
            return False
        log.info("expanding campaign %s (%s)", campaign.id, audiences.describe(campaign.audience))
        await self.expand(campaign)
        return True

    async def expand(self, campaign: Campaign) -> None:
        if campaign.audience_size is None:
            size = await audiences.size(self.db, campaign.audience)
            if not await store.set_audience_size(self.db, campaign.id, self.name, size, utcnow()):
                return
            campaign = await store.get(self.db, campaign.id) or campaign
        window = spread_seconds(campaign, self.settings.due_spread_seconds)
        planner = Planner(campaign, window, self.rng)
        kind = (await self.types.get({campaign.type}))[campaign.type]
        cursor, ordinal = campaign.cursor, campaign.expanded
        # Page n + 1 is read and built while page n is being stored (the database and this
        # process work at once); pages are still stored one after the other, in order.
        storing: asyncio.Task[bool] | None = None
        try:
            while True:
                ids = await audiences.page(
                    self.db, campaign.audience, cursor, self.settings.page_size
                )
                drafts, _ = await page_drafts(
                    self.db, planner, ids, ordinal, lambda _: kind.required
                )
                last = len(ids) < self.settings.page_size
                page = PageOfExpansion(drafts, ids[-1] if ids else None, len(ids), last)
                if storing is not None and not await self._stored(campaign, storing):
                    return
                storing = asyncio.create_task(self._store(campaign, page))
                if last:
                    if await self._stored(campaign, storing):
                        log.info("campaign %s: expanded, %d users", campaign.id, ordinal + len(ids))
                    return
                cursor, ordinal = ids[-1], ordinal + len(ids)
        finally:
            if storing is not None and not storing.done():
                await asyncio.wait([storing])  # never leave a page's transaction behind

    async def _store(self, campaign: Campaign, page: PageOfExpansion) -> bool:
        now = utcnow()
        lease = now + timedelta(seconds=self.settings.lease_seconds)
        return await store.store_page(self.db, campaign.id, self.name, page, now, lease)

    async def _stored(self, campaign: Campaign, storing: asyncio.Task[bool]) -> bool:
        """Whether the page in ``storing`` was stored (raises what storing it raised)."""
        if not await storing:
            log.info("campaign %s: stopped (cancelled or taken over)", campaign.id)
            return False
        self.wakeup.notify(Priority(campaign.priority))
        return True
