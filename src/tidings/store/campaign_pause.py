"""A campaign's reputation guard in SQL (campaigns/reputation.py): its last sends, counted
for complaints and hard bounces; its pause, which holds its unsent deliveries; its resume.

A paused campaign's PENDING deliveries are **held**: their ``next_attempt_at`` is moved to
``HOLD``, far past any claim, so no lane takes them and nothing of them is lost (they stay
PENDING, their day partition kept). A retry that comes back PENDING while the campaign is
paused is held too (``hold_paused``, every guard round). A resume makes them due at once.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa

from tidings.states import Status
from tidings.store.campaigns import Campaign, CampaignStatus, get
from tidings.store.dialects import Variants
from tidings.store.engine import Database
from tidings.store.schema import campaign, delivery, delivery_event, event

# When a held delivery is due: never, until its campaign is resumed.
HOLD = datetime(9000, 1, 1, tzinfo=UTC)
# The statuses of a campaign whose sends the guard watches.
RUNNING = (CampaignStatus.EXPANDING.value, CampaignStatus.SENDING.value)


@dataclass(frozen=True)
class Window:
    """A campaign's last ``sends`` sends (at most the window asked for)."""

    sends: int
    complaints: int
    hard_bounces: int


async def watched(db: Database) -> list[Campaign]:
    """Running campaigns the guard watches: all but transactional ones."""
    query = campaign.select().where(
        campaign.c.status.in_(RUNNING), campaign.c.category != "transactional"
    )
    async with db.engine.connect() as conn:
        return [Campaign.from_row(row) for row in await conn.execute(query)]


async def last_sends(db: Database, found: Campaign, size: int) -> Window:
    """The campaign's last ``size`` sends since its last pause (the sends before it were
    judged already), with how many complained and how many bounced hard (BOUNCED)."""
    where = [delivery.c.campaign_id == found.id, delivery.c.sent_at.is_not(None)]
    if found.paused_at is not None:
        where.append(delivery.c.sent_at > found.paused_at)
    recent = (
        sa.select(delivery.c.id, delivery.c.status)
        .where(*where)
        .order_by(delivery.c.sent_at.desc())
        .limit(size)
        .subquery()
    )
    complained = (
        sa.select(delivery_event.c.id)
        .where(delivery_event.c.delivery_id == recent.c.id, delivery_event.c.kind == "complained")
        .exists()
    )
    query = sa.select(
        sa.func.count(),
        sa.func.coalesce(sa.func.sum(sa.case((complained, 1), else_=0)), 0),
        sa.func.coalesce(
            sa.func.sum(sa.case((recent.c.status == Status.BOUNCED.value, 1), else_=0)), 0
        ),
    ).select_from(recent)
    async with db.engine.connect() as conn:
        sends, complaints, bounces = (await conn.execute(query)).one()
    return Window(int(sends), int(complaints), int(bounces))


async def pause(db: Database, campaign_id: uuid.UUID, reason: str, now: datetime) -> bool:
    """Pause a running campaign and hold its unsent deliveries, with a ``campaign.paused``
    event, in one transaction; False when it was not running."""
    statement = (
        sa.update(campaign)
        .where(campaign.c.id == campaign_id, campaign.c.status.in_(RUNNING))
        .values(
            status=CampaignStatus.PAUSED.value,
            paused_reason=reason[:300],
            paused_at=now,
            updated_at=now,
        )
    )
    async with db.engine.begin() as conn:
        if (await conn.execute(statement)).rowcount == 0:
            return False
        await conn.execute(_hold(delivery.c.campaign_id == campaign_id))
        await conn.execute(
            _event(db, campaign_id, "campaign.paused", now, {"status": "PAUSED", "reason": reason})
        )
    return True


async def hold_paused(db: Database) -> int:
    """Hold the deliveries of paused campaigns that became PENDING again (retries). The
    paused campaigns are locked while their deliveries are held, so that a resume running
    at once waits for this and then releases them all, instead of being undone by it."""
    paused = sa.select(campaign.c.id).where(campaign.c.status == CampaignStatus.PAUSED.value)
    async with db.engine.connect() as conn:  # an idle round takes no write lock
        if (await conn.execute(paused.limit(1))).first() is None:
            return 0
    async with db.engine.begin() as conn:
        ids = list(await conn.scalars(db.dialect.locked(paused)))
        if not ids:
            return 0
        return (await conn.execute(_hold(delivery.c.campaign_id.in_(ids)))).rowcount


async def resume(db: Database, campaign_id: uuid.UUID, now: datetime) -> Campaign | None:
    """Resume a paused campaign (its held deliveries due now; an expansion it had not
    finished is taken up again by an expander), with a ``campaign.resumed`` event; the
    campaign as it is afterwards, None when there is none. Not paused: left as it is."""
    statement = (
        sa.update(campaign)
        .where(campaign.c.id == campaign_id, campaign.c.status == CampaignStatus.PAUSED.value)
        .values(
            status=sa.case(
                (campaign.c.expanded_at.is_(None), CampaignStatus.EXPANDING.value),
                else_=CampaignStatus.SENDING.value,
            ),
            lease_until=None,  # an expansion to finish is claimable at once
            paused_reason=None,  # paused_at stays: the guard counts the sends after it
            updated_at=now,
        )
    )
    due = (
        sa.update(delivery)
        .where(
            delivery.c.campaign_id == campaign_id,
            delivery.c.status == Status.PENDING.value,
            delivery.c.next_attempt_at >= HOLD,
        )
        .values(next_attempt_at=now, updated_at=now)
    )
    async with db.engine.begin() as conn:
        if (await conn.execute(statement)).rowcount:
            await conn.execute(due)
            await conn.execute(_event(db, campaign_id, "campaign.resumed", now, {}))
    return await get(db, campaign_id)


def _hold(which: sa.ColumnElement[bool]) -> sa.Update:
    return (
        sa.update(delivery)
        .where(
            which,
            delivery.c.status == Status.PENDING.value,
            delivery.c.next_attempt_at < HOLD,
        )
        .values(next_attempt_at=HOLD)
    )


def _event(
    db: Database, campaign_id: uuid.UUID, kind: str, now: datetime, data: dict[str, Any]
) -> sa.Insert:
    """The event log's row for a pause or resume (the campaign's trigger writes only its
    ends), placed as the triggers place theirs."""
    found = sa.select(
        _PLACE.of(db),
        sa.literal(kind),
        sa.literal(now, event.c.at.type),
        campaign.c.id,
        sa.literal(data, event.c.data.type),
    ).where(campaign.c.id == campaign_id)
    columns: Sequence[str] = ("txid", "type", "at", "campaign_id", "data")
    return sa.insert(event).from_select(columns, found)


_PLACE: Variants[sa.ColumnElement[Any]] = Variants(
    postgres=sa.literal_column("pg_current_xact_id()::text::bigint"),
    sqlite=sa.null(),
)
