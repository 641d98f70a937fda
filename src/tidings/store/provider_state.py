"""Circuit breaker states as each dispatcher last reported them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from tidings.store.engine import Database
from tidings.store.schema import provider_state
from tidings.store.upsert import upsert


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


async def recent(db: Database, since: datetime) -> list[dict[str, Any]]:
    query = (
        sa.select(provider_state)
        .where(provider_state.c.updated_at >= since)
        .order_by(provider_state.c.account, provider_state.c.dispatcher)
    )
    async with db.engine.connect() as conn:
        return [dict(row._mapping) for row in await conn.execute(query)]


async def reports(db: Database, since: datetime) -> list[ProviderReport]:
    """The reports made since ``since``, by account and dispatcher."""
    return [ProviderReport(**row) for row in await recent(db, since)]


async def live_dispatchers(db: Database, since: datetime) -> int:
    """How many dispatchers reported since ``since`` (each reports every few seconds)."""
    query = sa.select(sa.func.count(sa.distinct(provider_state.c.dispatcher))).where(
        provider_state.c.updated_at >= since
    )
    async with db.engine.connect() as conn:
        return int((await conn.execute(query)).scalar_one())


async def reported_lanes(db: Database, since: datetime) -> dict[str, list[dict[str, Any]]]:
    """Each dispatcher that reported since ``since``, with its lanes as reported (their
    progress, dispatch/lanes/progress.py): who reads which Kafka lane now."""
    found: dict[str, list[dict[str, Any]]] = {}
    for row in await recent(db, since):
        found[row["dispatcher"]] = list(row["state"].get("lanes") or [])
    return found
