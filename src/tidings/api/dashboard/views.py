"""What the dashboard's pages show, read from the store with cheap, indexed queries: the
lanes and the last hour are the whole service's (as /metrics shows them), dead letters and
campaigns the caller's namespace's."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from tidings.api.routes.deadletters import dead_letter
from tidings.api.routes.providers import FRESH
from tidings.api.schemas import DeadLetter
from tidings.campaigns.progress import progress
from tidings.priorities import Priority
from tidings.store import campaigns, deadletters, gauges, provider_state
from tidings.store.campaigns import CampaignStatus
from tidings.store.dashboard import BUCKET, BUCKETS, Route, last_hour
from tidings.store.engine import Database
from tidings.store.gauges import LaneQueue

OVERVIEW_DEAD_LETTERS = 10
PAGE_DEAD_LETTERS = 100
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
class Overview:
    lanes: list[Lane]
    bucket_minutes: int
    routes: list[Route]
    breakers: list[Breaker]
    dead_letters: list[DeadLetter]
    campaigns: list[CampaignRow]


async def overview(db: Database, namespace: str, now: datetime) -> Overview:
    queues = await gauges.lane_queues(db, now)
    hour = await last_hour(db, now)
    idle = [0] * BUCKETS
    lanes = [
        Lane(p.value, queues.get(p.value, LaneQueue()), hour.sent_by_lane.get(p.value, idle))
        for p in Priority
    ]
    return Overview(
        lanes=lanes,
        bucket_minutes=int(BUCKET.total_seconds() // 60),
        routes=hour.routes,
        breakers=await breakers(db, now),
        dead_letters=await dead_letters(db, namespace, OVERVIEW_DEAD_LETTERS),
        campaigns=await newest_campaigns(db, namespace, now),
    )


async def breakers(db: Database, now: datetime) -> list[Breaker]:
    """Each account's breaker as every dispatcher reported it in the last 30 s."""
    return [
        Breaker(
            account=row["account"],
            dispatcher=row["dispatcher"],
            state=str(row["state"].get("state", "unknown")),
            consecutive_failures=row["state"].get("consecutiveFailures"),
            retry_in_seconds=row["state"].get("retryInSeconds"),
            updated_at=row["updated_at"],
        )
        for row in await provider_state.recent(db, now - FRESH)
    ]


async def dead_letters(db: Database, namespace: str, limit: int) -> list[DeadLetter]:
    rows = await deadletters.list_dead(db, namespace, deadletters.DEAD_KINDS, limit)
    return [dead_letter(row) for row in rows]


async def newest_campaigns(db: Database, namespace: str, now: datetime) -> list[CampaignRow]:
    """The newest campaigns; only the unfinished ones' deliveries are counted."""
    shown = []
    for found in await campaigns.newest(db, namespace, CAMPAIGNS, None):
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
