"""Where a campaign stands: its deliveries by status, percent done and estimated finish, and
the final counts a cancel answers with."""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from tidings.states import Status
from tidings.store import campaigns as store
from tidings.store.campaigns import IN_PROGRESS, Campaign, CampaignStatus
from tidings.store.engine import Database

SENT = (Status.SENT.value, Status.DELIVERED.value, Status.BOUNCED.value)


@dataclass(frozen=True)
class Progress:
    campaign: Campaign
    by_status: dict[str, int]
    skipped_by_reason: dict[str, int]
    percent_done: float
    estimated_finish: datetime | None

    def total(self, *statuses: str) -> int:
        return sum(self.by_status.get(s, 0) for s in statuses)


async def progress(db: Database, campaign: Campaign, now: datetime) -> Progress:
    by_status = await store.delivery_counts(db, campaign.id)
    reasons = await store.skip_reasons(db, campaign.id) if by_status.get("SKIPPED") else {}
    finished = sum(n for s, n in by_status.items() if s not in IN_PROGRESS)
    expected = _expected_deliveries(campaign)
    percent = 100.0 if campaign.status == CampaignStatus.DONE else 0.0
    if expected and campaign.status != CampaignStatus.DONE:
        percent = min(100.0, round(100.0 * finished / expected, 1))
    return Progress(
        campaign, by_status, reasons, percent, _finish(campaign, finished, expected, now)
    )


def _expected_deliveries(campaign: Campaign) -> int:
    """The deliveries the whole audience will have, judged from the pages so far."""
    if campaign.status != CampaignStatus.EXPANDING or not campaign.expanded:
        return campaign.deliveries
    per_user = campaign.deliveries / campaign.expanded
    return round(per_user * max(campaign.audience_size or 0, campaign.expanded))


def _finish(campaign: Campaign, finished: int, expected: int, now: datetime) -> datetime | None:
    """When the last delivery should be done: not before the end of its window, and not
    before the pace so far would get there."""
    if CampaignStatus(campaign.status).is_final:
        return campaign.finished_at
    window_end = campaign.send_at + timedelta(seconds=campaign.spread_seconds)
    if campaign.local_time:
        window_end += timedelta(days=1)  # the last time zone's wall clock: within a day
    started = campaign.started_at
    if not started or not finished or now <= started:
        return window_end
    rate = finished / (now - started).total_seconds()
    paced = now + timedelta(seconds=max(0, expected - finished) / rate)
    return max(window_end, paced)


@dataclass(frozen=True)
class FinalCounts:
    status: str
    sent: int
    cancelled: int
    skipped: int
    failed: int
    expired: int
    in_progress: int


def final_counts(campaign: Campaign, by_status: dict[str, int]) -> FinalCounts:
    def total(*statuses: str) -> int:
        return sum(by_status.get(s, 0) for s in statuses)

    return FinalCounts(
        status=campaign.status,
        sent=total(*SENT),
        cancelled=total(Status.CANCELLED.value),
        skipped=total(Status.SKIPPED.value),
        failed=total(Status.FAILED.value),
        expired=total(Status.EXPIRED.value),
        in_progress=total(*IN_PROGRESS),
    )


# Deliveries cancelled per statement: each is one short transaction.
CANCEL_PAGE = 5_000
# How long the dispatchers' knowledge of cancelled campaigns may lag (store/campaigns.py,
# CancelledCampaigns: refreshed every 0.5 s), with a margin.
DISPATCHER_STALENESS = 1.0


async def cancel(
    db: Database, campaign_id: uuid.UUID, now: datetime, wait_seconds: float
) -> FinalCounts | None:
    """Cancel a campaign and answer its counts; None when there is no such campaign.

    The expansion stops at its next page; every unclaimed delivery becomes CANCELLED in
    pages; then this waits (up to ``wait_seconds``) for the ones being sent right now, so
    that after the answer the providers get nothing more from the campaign. A claimed one
    that a dispatcher had not sent yet is dropped by it (CANCELLED) before its provider is
    called. Cancelling again, or a finished campaign, answers the same counts.
    """
    campaign = await store.mark_cancelled(db, campaign_id, now)
    if campaign is None:
        return None
    if campaign.status == CampaignStatus.CANCELLED:
        await _settle(db, campaign_id, now, time.monotonic() + wait_seconds)
    return final_counts(campaign, await store.delivery_counts(db, campaign_id))


async def _settle(db: Database, campaign_id: uuid.UUID, now: datetime, deadline: float) -> None:
    settled_from = time.monotonic() + DISPATCHER_STALENESS
    while True:
        counts = await store.delivery_counts(db, campaign_id)
        sending = counts.get(Status.SENDING.value, 0)
        while await store.cancel_unclaimed(db, campaign_id, now, CANCEL_PAGE):
            pass
        if (not sending and time.monotonic() >= settled_from) or time.monotonic() > deadline:
            return
        await asyncio.sleep(0.05)
