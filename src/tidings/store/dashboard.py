"""The dashboard's reads of the last hour (api/routes/dashboard.py): sends per lane in
5-minute buckets, and sends and failed attempts per channel and provider.

Each is served by an index, however many rows the table holds: the sends by
``ix_delivery_sent`` (every column it reads is in the index), the failed attempts by
``delivery_event``'s primary key, whose UUID v7 ids are ordered by the time they were
written, so that the last hour is one range of it.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa

from tidings.store.engine import Database
from tidings.store.schema import delivery, delivery_event

WINDOW = timedelta(hours=1)
BUCKETS = 12
BUCKET = WINDOW / BUCKETS
# An attempt that failed: retried later, or the delivery's final failure.
FAILED_ATTEMPTS = ("retry_scheduled", "failed")


@dataclass(frozen=True)
class Route:
    """One channel through one provider account (None: failed before reaching one, such
    as a template that did not render) over the last hour."""

    channel: str
    provider: str | None
    sent: int = 0
    failed: int = 0  # failed attempts

    @property
    def failure_rate(self) -> float:
        attempts = self.sent + self.failed
        return self.failed / attempts if attempts else 0.0


@dataclass(frozen=True)
class LastHour:
    since: datetime
    sent_by_lane: dict[str, list[int]]  # per priority: sends per bucket, oldest first
    routes: list[Route]


def first_id_at(at: datetime) -> uuid.UUID:
    """The smallest UUID v7 made at ``at`` or later: its first 48 bits are the milliseconds."""
    return uuid.UUID(int=int(at.timestamp() * 1000) << 80)


async def last_hour(db: Database, now: datetime) -> LastHour:
    since = now - WINDOW
    async with db.engine.connect() as conn:
        sends = (await conn.execute(_sends(since))).all()
        failures = (await conn.execute(_failed_attempts(since))).all()
    sent_by_lane: dict[str, list[int]] = defaultdict(lambda: [0] * BUCKETS)
    sent_by_route: dict[tuple[str, str | None], int] = defaultdict(int)
    for priority, channel, provider, *at_or_after in sends:
        # at_or_after[k]: sent at the start of bucket k or later; a bucket is the difference.
        counts = [int(n or 0) for n in at_or_after] + [0]
        lane = sent_by_lane[priority]
        for k in range(BUCKETS):
            lane[k] += counts[k] - counts[k + 1]
        sent_by_route[(channel, provider)] += counts[0]
    failed = {(channel, provider): int(n) for channel, provider, n in failures}
    keys = sorted(set(sent_by_route) | set(failed), key=lambda k: (k[0], k[1] or ""))
    routes = [Route(c, p, sent_by_route.get((c, p), 0), failed.get((c, p), 0)) for c, p in keys]
    return LastHour(since, dict(sent_by_lane), routes)


def _sends(since: datetime) -> sa.Select[Any]:
    at_or_after = [
        sa.func.sum(sa.case((delivery.c.sent_at >= since + k * BUCKET, 1), else_=0))
        for k in range(BUCKETS)
    ]
    return (
        sa.select(delivery.c.priority, delivery.c.channel, delivery.c.provider, *at_or_after)
        .where(delivery.c.sent_at.is_not(None), delivery.c.sent_at >= since)
        .group_by(delivery.c.priority, delivery.c.channel, delivery.c.provider)
    )


def _failed_attempts(since: datetime) -> sa.Select[Any]:
    provider = delivery_event.c.detail["provider"].as_string()
    return (
        sa.select(delivery.c.channel, provider, sa.func.count())
        .select_from(delivery_event.join(delivery, delivery.c.id == delivery_event.c.delivery_id))
        .where(
            delivery_event.c.id >= first_id_at(since),
            delivery_event.c.at >= since,
            delivery_event.c.kind.in_(FAILED_ATTEMPTS),
        )
        .group_by(delivery.c.channel, provider)
    )
