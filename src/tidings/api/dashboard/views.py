"""What the dashboard's pages show: the service's activity (services/dashboard.py) and the
caller's namespace's dead letters, their addresses masked as the API masks them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from tidings.api.routes.deadletters import dead_letter
from tidings.api.schemas import DeadLetter
from tidings.service import Service
from tidings.services import dashboard, deadletters
from tidings.services.dashboard import Breaker, CampaignRow, Lane, Route

OVERVIEW_DEAD_LETTERS = 10
PAGE_DEAD_LETTERS = 100


@dataclass(frozen=True)
class Overview:
    lanes: list[Lane]
    bucket_minutes: int
    routes: list[Route]
    breakers: list[Breaker]
    dead_letters: list[DeadLetter]
    campaigns: list[CampaignRow]


async def overview(service: Service, namespace: str, now: datetime) -> Overview:
    found = await dashboard.activity(service.db, namespace, now)
    return Overview(
        lanes=found.lanes,
        bucket_minutes=found.bucket_minutes,
        routes=found.routes,
        breakers=found.breakers,
        dead_letters=await dead_letters(service, namespace, OVERVIEW_DEAD_LETTERS),
        campaigns=found.campaigns,
    )


async def dead_letters(service: Service, namespace: str, limit: int) -> list[DeadLetter]:
    rows = await deadletters.listed(service.db, namespace, limit=limit)
    return [dead_letter(row) for row in rows]
