"""Circuit breaker states as each dispatcher last reported them.

Each dispatcher reports every ``REPORT_SECONDS``; its reports say too that it is alive.
One whose last report is older than ``LIVE_SECONDS`` is gone (killed): its share of each
rate, its Kafka partitions and its breakers' say are the others'. ``reports`` is the one
reader of the rows, for the fleet's view, breaker sharing and the lanes' liveness alike."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa

from tidings.store.engine import Database
from tidings.store.schema import provider_state
from tidings.store.upsert import upsert

# Seconds between a dispatcher's reports, and after which one that stopped reporting is
# gone: three reports missed.
REPORT_SECONDS = 2.0
LIVE_SECONDS = 3 * REPORT_SECONDS


@dataclass(frozen=True)
class ProviderReport:
    """One dispatcher's last report of one account: its breaker's state (and, in every
    account's report, the dispatcher's ``lanes``)."""

    account: str
    dispatcher: str
    state: dict[str, Any]
    updated_at: datetime


async def report(
    db: Database, dispatcher: str, states: dict[str, dict[str, Any]], now: datetime
) -> None:
    for account, state in states.items():
        row = {"account": account, "dispatcher": dispatcher, "state": state, "updated_at": now}
        await upsert(db, provider_state, ["account", "dispatcher"], row)


async def forget(db: Database, dispatcher: str) -> None:
    """A dispatcher shutting down takes its reports with it."""
    async with db.engine.begin() as conn:
        await conn.execute(
            sa.delete(provider_state).where(provider_state.c.dispatcher == dispatcher)
        )


async def reports(db: Database, since: datetime) -> list[ProviderReport]:
    """The reports made since ``since``, by account and dispatcher."""
    query = (
        sa.select(provider_state)
        .where(provider_state.c.updated_at >= since)
        .order_by(provider_state.c.account, provider_state.c.dispatcher)
    )
    async with db.engine.connect() as conn:
        return [ProviderReport(**row._mapping) for row in await conn.execute(query)]


def live_since(now: datetime) -> datetime:
    """The oldest report of a dispatcher still alive at ``now``."""
    return now - timedelta(seconds=LIVE_SECONDS)


async def live_dispatchers(db: Database, since: datetime) -> int:
    """How many dispatchers reported since ``since`` (each reports every few seconds)."""
    query = sa.select(sa.func.count(sa.distinct(provider_state.c.dispatcher))).where(
        provider_state.c.updated_at >= since
    )
    async with db.engine.connect() as conn:
        return int((await conn.execute(query)).scalar_one())
