"""The reads behind /metrics' database gauges: lane queues, dead letters, running campaigns.

Each read is served by an index (store/schema.py), so that a scrape costs no scan of the
finished rows: the queues read ``ix_delivery_due`` (PENDING rows only) and
``ix_delivery_queued``, the dead letters ``ix_delivery_failed`` (FAILED rows only), the
campaigns ``ix_campaign_status_send_at``. The API caches the answers (api/store_gauges.py).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa

from tidings.states import Status
from tidings.store.campaigns import CampaignStatus
from tidings.store.deadletters import DEAD_KINDS
from tidings.store.engine import Database
from tidings.store.schema import campaign, delivery

RUNNING_CAMPAIGNS = (
    CampaignStatus.SCHEDULED.value,
    CampaignStatus.EXPANDING.value,
    CampaignStatus.SENDING.value,
)


@dataclass(frozen=True)
class LaneQueue:
    """One priority's deliveries waiting: due now, due later, published to Kafka (QUEUED),
    and when the longest-waiting due one became due."""

    due: int = 0
    scheduled: int = 0
    queued: int = 0
    oldest_due: datetime | None = None


@dataclass(frozen=True)
class RunningCampaign:
    id: uuid.UUID
    name: str | None
    status: str
    audience_size: int | None
    expanded: int
    deliveries: int


async def lane_queues(db: Database, now: datetime) -> dict[str, LaneQueue]:
    """Per priority (the lanes), what waits."""
    due = sa.func.sum(sa.case((delivery.c.next_attempt_at <= now, 1), else_=0))
    pending = (
        sa.select(
            delivery.c.priority, sa.func.count(), due, sa.func.min(delivery.c.next_attempt_at)
        )
        .where(delivery.c.status == Status.PENDING.value)
        .group_by(delivery.c.priority)
    )
    queued = (
        sa.select(delivery.c.priority, sa.func.count())
        .where(delivery.c.status == Status.QUEUED.value)
        .group_by(delivery.c.priority)
    )
    async with db.engine.connect() as conn:
        waiting = (await conn.execute(pending)).all()
        published: dict[str, int] = {p: n for p, n in await conn.execute(queued)}
    lanes = {
        priority: LaneQueue(
            due=int(ready or 0),
            scheduled=int(total) - int(ready or 0),
            queued=int(published.get(priority, 0)),
            oldest_due=oldest if oldest is not None and oldest <= now else None,
        )
        for priority, total, ready, oldest in waiting
    }
    for priority, count in published.items():
        lanes.setdefault(priority, LaneQueue(queued=int(count)))
    return lanes


async def dead_letters(db: Database) -> dict[str, int]:
    """The dead-letter queue's size (GET /v1/dead-letters: every namespace), by kind."""
    query = (
        sa.select(delivery.c.failure_kind, sa.func.count())
        .where(
            delivery.c.status == Status.FAILED.value,
            delivery.c.failure_kind.in_(DEAD_KINDS),
        )
        .group_by(delivery.c.failure_kind)
    )
    async with db.engine.connect() as conn:
        found: dict[str, int] = {kind: n for kind, n in await conn.execute(query)}
    return {kind: int(found.get(kind, 0)) for kind in DEAD_KINDS}


async def running_campaigns(db: Database, limit: int) -> list[RunningCampaign]:
    """The newest ``limit`` campaigns not yet DONE or CANCELLED, with their progress."""
    query = (
        sa.select(
            campaign.c.id,
            campaign.c.name,
            campaign.c.status,
            campaign.c.audience_size,
            campaign.c.expanded,
            campaign.c.deliveries,
        )
        .where(campaign.c.status.in_(RUNNING_CAMPAIGNS))
        .order_by(campaign.c.created_at.desc())
        .limit(limit)
    )
    async with db.engine.connect() as conn:
        return [RunningCampaign(*row) for row in await conn.execute(query)]
