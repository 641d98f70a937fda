"""The gauges /metrics reads from the database (docs/operations.md, Metrics): lane queues,
dead letters, breaker states and running campaigns, each from an index (store/gauges.py).
They describe the whole service, whichever process reads them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from tidings.clock import utcnow
from tidings.services.providers import FRESH
from tidings.store import gauges, provider_state
from tidings.store.engine import Database
from tidings.store.gauges import LaneQueue, RunningCampaign

__all__ = ["BREAKER_CODES", "LaneQueue", "RunningCampaign", "Snapshot", "read_snapshot"]

# tidings_breaker_state: the worst state any live dispatcher reports for the account.
BREAKER_CODES = {"closed": 0, "half_open": 1, "open": 2}
# Running campaigns listed, newest first: a bound on the campaign gauges' series.
MAX_CAMPAIGNS = 50


@dataclass(frozen=True)
class Snapshot:
    at: datetime
    queues: dict[str, LaneQueue]
    dead_letters: dict[str, int]
    breakers: dict[str, int]
    campaigns: list[RunningCampaign]


async def read_snapshot(db: Database) -> Snapshot:
    now = utcnow()
    breakers: dict[str, int] = {}
    for row in await provider_state.reports(db, now - FRESH):
        code = BREAKER_CODES.get(str(row.state.get("state")), 0)
        breakers[row.account] = max(code, breakers.get(row.account, 0))
    return Snapshot(
        at=now,
        queues=await gauges.lane_queues(db, now),
        dead_letters=await gauges.dead_letters(db),
        breakers=breakers,
        campaigns=await gauges.running_campaigns(db, MAX_CAMPAIGNS),
    )
