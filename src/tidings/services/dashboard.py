"""What the dashboard's pages show of the whole service, read with cheap, indexed queries:
the lanes and the last hour (as /metrics shows them), the breakers, and a namespace's
newest campaigns."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from tidings.campaigns.progress import progress
from tidings.campaigns.reads import CampaignStatus, newest
from tidings.priorities import Priority
from tidings.services.providers import FRESH
from tidings.store import gauges, provider_state
from tidings.store.dashboard import BUCKET, BUCKETS, Route, last_hour
from tidings.store.engine import Database
from tidings.store.gauges import LaneQueue

__all__ = ["Activity", "Breaker", "CampaignRow", "Lane", "LaneQueue", "Route", "activity"]

CAMPAIGNS = 10


@dataclass(frozen=True)
class Lane:
    priority: str
    queue: LaneQueue
    sent: list[int]  # per 5-minute bucket of the last hour, oldest first

    @property
    def sent_last_hour(self) -> int:
        return sum(self.sent)


@dataclass(frozen=True)
class Breaker:
    account: str
    dispatcher: str
    state: str  # closed, half_open, open
    consecutive_failures: int | None
    retry_in_seconds: float | None
    updated_at: datetime


@dataclass(frozen=True)
class CampaignRow:
    id: uuid.UUID
    name: str | None
    type: str
    status: str
    audience_size: int | None
    expanded: int
    deliveries: int
    percent_done: float | None  # None: cancelled


@dataclass(frozen=True)
class Activity:
    lanes: list[Lane]
    bucket_minutes: int
    routes: list[Route]
    breakers: list[Breaker]
    campaigns: list[CampaignRow]


async def activity(db: Database, namespace: str, now: datetime) -> Activity:
    queues = await gauges.lane_queues(db, now)
    hour = await last_hour(db, now)
    idle = [0] * BUCKETS
    lanes = [
        Lane(p.value, queues.get(p.value, LaneQueue()), hour.sent_by_lane.get(p.value, idle))
        for p in Priority
    ]
    return Activity(
        lanes=lanes,
        bucket_minutes=int(BUCKET.total_seconds() // 60),
        routes=hour.routes,
        breakers=await breakers(db, now),
        campaigns=await newest_campaigns(db, namespace, now),
    )


async def breakers(db: Database, now: datetime) -> list[Breaker]:
    """Each account's breaker as every dispatcher reported it in the last 30 s."""
    return [
        Breaker(
            account=row.account,
            dispatcher=row.dispatcher,
            state=str(row.state.get("state", "unknown")),
            consecutive_failures=row.state.get("consecutiveFailures"),
            retry_in_seconds=row.state.get("retryInSeconds"),
            updated_at=row.updated_at,
        )
        for row in await provider_state.reports(db, now - FRESH)
    ]


async def newest_campaigns(db: Database, namespace: str, now: datetime) -> list[CampaignRow]:
    """The newest campaigns; only the unfinished ones' deliveries are counted."""
    shown = []
    for found in await newest(db, namespace, CAMPAIGNS):
        percent: float | None = None
        if found.status == CampaignStatus.DONE:
            percent = 100.0
        elif found.status != CampaignStatus.CANCELLED:
            percent = (await progress(db, found, now)).percent_done
        shown.append(
            CampaignRow(
                found.id,
                found.name,
                found.type,
                found.status,
                found.audience_size,
                found.expanded,
                found.deliveries,
                percent,
            )
        )
    return shown
