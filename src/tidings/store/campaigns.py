"""Campaigns' SQL: the campaign row, its claim by an expander, a page of its expansion in one
transaction, its cancel and its counts (docs/architecture.md, Campaigns).

The expander's fence is the pair (status EXPANDING, expander = this process) in the WHERE of
every page's update: a process whose lease expired, or a campaign cancelled meanwhile, makes
the page's transaction roll back whole, notifications and deliveries included.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

import sqlalchemy as sa

from tidings.states import Status
from tidings.store.dialects import Variants
from tidings.store.dialects.postgres import for_asyncpg
from tidings.store.engine import Database
from tidings.store.intake import NotificationDraft, insert_postgres, insert_sqlite
from tidings.store.schema import campaign, delivery
from tidings.store.upsert import insert


class CampaignStatus(StrEnum):
    SCHEDULED = "SCHEDULED"  # waiting for its sendAt
    EXPANDING = "EXPANDING"  # pages of its audience becoming deliveries
    SENDING = "SENDING"  # every delivery exists; some are not finished
    DONE = "DONE"  # every delivery finished
    CANCELLED = "CANCELLED"
    # Its reputation guard stopped it (complaints or hard bounces): nothing of it is sent
    # until it is resumed (campaigns/reputation.py).
    PAUSED = "PAUSED"

    @property
    def is_final(self) -> bool:
        return self in (CampaignStatus.DONE, CampaignStatus.CANCELLED)


@dataclass(frozen=True)
class Campaign:
    id: uuid.UUID
    namespace: str
    idempotency_key: str
    request_hash: str
    name: str | None
    type: str
    category: str
    priority: str
    audience: Mapping[str, Any]
    data: dict[str, Any]
    channels: Sequence[str]
    send_at: datetime
    spread_seconds: int
    local_time: str | None
    timezone: str | None
    status: str
    audience_size: int | None
    cursor: str | None
    expanded: int
    deliveries: int
    expander: str | None
    lease_until: datetime | None
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None
    expanded_at: datetime | None
    finished_at: datetime | None
    paused_reason: str | None = None
    paused_at: datetime | None = None

    @classmethod
    def from_row(cls, row: sa.Row[Any]) -> Campaign:
        values = row._mapping
        return cls(**{name: values[name] for name in _COLUMNS})


_COLUMNS = tuple(column.name for column in campaign.columns)
# Delivery statuses a dispatcher may still act on.
IN_PROGRESS = (Status.PENDING.value, Status.QUEUED.value, Status.SENDING.value)
NOT_CLAIMED = (Status.PENDING.value, Status.QUEUED.value)


async def create(db: Database, row: Mapping[str, Any]) -> tuple[Campaign, bool]:
    """Insert a campaign unless its (namespace, idempotency key) exists; the stored one and
    whether it was inserted now."""
    statement = insert(db, campaign).values(dict(row)).on_conflict_do_nothing()
    async with db.engine.begin() as conn:
        inserted = (await conn.execute(statement)).rowcount > 0
        query = sa.select(campaign).where(
            campaign.c.namespace == row["namespace"],
            campaign.c.idempotency_key == row["idempotency_key"],
        )
        stored = (await conn.execute(query)).one()
    return Campaign.from_row(stored), inserted


async def get(db: Database, campaign_id: uuid.UUID) -> Campaign | None:
    async with db.engine.connect() as conn:
        row = (await conn.execute(campaign.select().where(campaign.c.id == campaign_id))).first()
    return None if row is None else Campaign.from_row(row)


async def newest(
    db: Database, namespace: str, limit: int, before: tuple[datetime, uuid.UUID] | None
) -> list[Campaign]:
    """A namespace's campaigns, newest first, after the page that ended at ``before``."""
    query = campaign.select().where(campaign.c.namespace == namespace)
    if before is not None:
        created, last_id = before
        query = query.where(
            sa.or_(
                campaign.c.created_at < created,
                sa.and_(campaign.c.created_at == created, campaign.c.id < last_id),
            )
        )
    query = query.order_by(campaign.c.created_at.desc(), campaign.c.id.desc()).limit(limit)
    async with db.engine.connect() as conn:
        return [Campaign.from_row(row) for row in await conn.execute(query)]


def _claimable(now: datetime) -> sa.ColumnElement[bool]:
    """Due and not expanding, or expanding by a process whose lease ran out."""
    return sa.or_(
        sa.and_(campaign.c.status == CampaignStatus.SCHEDULED.value, campaign.c.send_at <= now),
        sa.and_(campaign.c.status == CampaignStatus.EXPANDING.value, campaign.c.lease_until < now),
    )


async def claim_due(
    db: Database, expander: str, now: datetime, lease_until: datetime
) -> Campaign | None:
    """Take one due campaign for expansion (any number of dispatchers may ask at once)."""
    due = sa.select(campaign.c.id).where(_claimable(now)).order_by(campaign.c.send_at).limit(1)
    # Asked every poll by every dispatcher: a read first, so that an idle poll takes no
    # write lock (SQLite has one for the whole database).
    async with db.engine.connect() as conn:
        if (await conn.execute(due)).first() is None:
            return None
    due = db.dialect.locked(due, skip_locked=True)
    statement = (
        sa.update(campaign)
        .where(campaign.c.id == due.scalar_subquery(), _claimable(now))
        .values(
            status=CampaignStatus.EXPANDING.value,
            expander=expander,
            lease_until=lease_until,
            started_at=sa.func.coalesce(campaign.c.started_at, now),
            updated_at=now,
        )
        .returning(*campaign.c)
    )
    async with db.engine.begin() as conn:
        row = (await conn.execute(statement)).first()
    return None if row is None else Campaign.from_row(row)


def _fenced(campaign_id: uuid.UUID, expander: str) -> sa.ColumnElement[bool]:
    return sa.and_(
        campaign.c.id == campaign_id,
        campaign.c.status == CampaignStatus.EXPANDING.value,
        campaign.c.expander == expander,
    )


async def set_audience_size(
    db: Database, campaign_id: uuid.UUID, expander: str, audience_size: int, now: datetime
) -> bool:
    statement = (
        sa.update(campaign)
        .where(_fenced(campaign_id, expander))
        .values(audience_size=audience_size, updated_at=now)
    )
    async with db.engine.begin() as conn:
        return (await conn.execute(statement)).rowcount > 0


@dataclass(frozen=True)
class PageOfExpansion:
    """One page's rows and where the expansion stands after it."""

    drafts: Sequence[NotificationDraft]
    cursor: str | None  # the last user id of the page
    users: int
    last: bool  # the audience has no user after this page


class FenceLost(Exception):
    """The campaign was cancelled, or another expander took it: the page is not stored."""


async def store_page(
    db: Database,
    campaign_id: uuid.UUID,
    expander: str,
    page: PageOfExpansion,
    now: datetime,
    lease_until: datetime,
) -> bool:
    """Insert the page's notifications and deliveries and advance the cursor, in one
    transaction; False (nothing stored) when the fence is lost."""
    try:
        await _store_page.of(db)(db, campaign_id, expander, page, now, lease_until)
    except FenceLost:
        return False
    return True


async def _store_page_postgres(
    db: Database,
    campaign_id: uuid.UUID,
    expander: str,
    page: PageOfExpansion,
    now: datetime,
    lease_until: datetime,
) -> None:
    async with db.asyncpg() as conn, conn.transaction():
        inserted = await insert_postgres(conn, page.drafts, now)
        params = _advance_values(campaign_id, expander, page, inserted, now, lease_until)
        await _advance_postgres(conn, params)


async def _store_page_sqlite(
    db: Database,
    campaign_id: uuid.UUID,
    expander: str,
    page: PageOfExpansion,
    now: datetime,
    lease_until: datetime,
) -> None:
    async with db.engine.begin() as conn:
        inserted = await insert_sqlite(conn, page.drafts, now)
        params = _advance_values(campaign_id, expander, page, inserted, now, lease_until)
        if (await conn.execute(_ADVANCE, params)).rowcount == 0:
            raise FenceLost  # rolls the page back


def _advance_values(
    campaign_id: uuid.UUID,
    expander: str,
    page: PageOfExpansion,
    inserted: set[uuid.UUID],
    now: datetime,
    lease_until: datetime,
) -> dict[str, Any]:
    """The parameters of ``_ADVANCE``, by name."""
    rows = sum(len(d.deliveries) for d in page.drafts if d.id in inserted)
    done = page.last
    return {
        "b_id": campaign_id,
        "b_expander": expander,
        "b_cursor": page.cursor,
        "b_expanded": page.users,
        "b_deliveries": rows,
        "b_lease_until": lease_until,
        "b_updated_at": now,
        "b_status": CampaignStatus.SENDING.value if done else CampaignStatus.EXPANDING.value,
        "b_expanded_at": now if done else None,
    }


def _advance_statement() -> sa.Update:
    """Advance the cursor by a page, fenced as ``_fenced``: one statement for both dialects
    (asyncpg runs it as SQLAlchemy renders it, ``_ADVANCE_ASYNCPG``)."""
    c = campaign.c
    return (
        sa.update(campaign)
        .where(
            c.id == sa.bindparam("b_id"),
            c.status == sa.literal_column(f"'{CampaignStatus.EXPANDING.value}'"),
            c.expander == sa.bindparam("b_expander"),
        )
        .values(
            cursor=sa.func.coalesce(sa.bindparam("b_cursor", type_=c.cursor.type), c.cursor),
            expanded=c.expanded + sa.bindparam("b_expanded", type_=c.expanded.type),
            deliveries=c.deliveries + sa.bindparam("b_deliveries", type_=c.deliveries.type),
            lease_until=sa.bindparam("b_lease_until"),
            updated_at=sa.bindparam("b_updated_at"),
            status=sa.bindparam("b_status"),
            expanded_at=sa.bindparam("b_expanded_at"),
        )
    )


_ADVANCE = _advance_statement()
_ADVANCE_ASYNCPG = for_asyncpg(_ADVANCE)


async def _advance_postgres(conn: Any, params: dict[str, Any]) -> None:
    result = await conn.execute(_ADVANCE_ASYNCPG.text, *_ADVANCE_ASYNCPG.args(params))
    if result == "UPDATE 0":
        raise FenceLost  # rolls the page back


_store_page = Variants(postgres=_store_page_postgres, sqlite=_store_page_sqlite)


async def finish_sent(db: Database, now: datetime) -> int:
    """SENDING campaigns none of whose deliveries is still in progress become DONE."""
    busy = (
        sa.select(delivery.c.id)
        .where(delivery.c.campaign_id == campaign.c.id, delivery.c.status.in_(IN_PROGRESS))
        .exists()
    )
    sending = sa.select(campaign.c.id).where(campaign.c.status == CampaignStatus.SENDING.value)
    async with db.engine.connect() as conn:  # an idle poll takes no write lock
        if (await conn.execute(sending.limit(1))).first() is None:
            return 0
    statement = (
        sa.update(campaign)
        .where(campaign.c.status == CampaignStatus.SENDING.value, ~busy)
        .values(status=CampaignStatus.DONE.value, finished_at=now, updated_at=now)
    )
    async with db.engine.begin() as conn:
        return (await conn.execute(statement)).rowcount


async def mark_cancelled(db: Database, campaign_id: uuid.UUID, now: datetime) -> Campaign | None:
    """Cancel a campaign that is not final yet (this also stops its expansion: the next
    page's fence fails); the campaign as it is afterwards, None when there is none."""
    statement = (
        sa.update(campaign)
        .where(
            campaign.c.id == campaign_id,
            campaign.c.status.not_in([s.value for s in CampaignStatus if s.is_final]),
        )
        .values(status=CampaignStatus.CANCELLED.value, finished_at=now, updated_at=now)
    )
    async with db.engine.begin() as conn:
        await conn.execute(statement)
    return await get(db, campaign_id)


async def cancel_unclaimed(db: Database, campaign_id: uuid.UUID, now: datetime, limit: int) -> int:
    """Mark up to ``limit`` of the campaign's unclaimed deliveries CANCELLED (one short
    transaction: call it until it returns 0)."""
    page = (
        sa.select(delivery.c.id)
        .where(delivery.c.campaign_id == campaign_id, delivery.c.status.in_(NOT_CLAIMED))
        .limit(limit)
    )
    statement = (
        sa.update(delivery)
        .where(delivery.c.id.in_(page.scalar_subquery()), delivery.c.status.in_(NOT_CLAIMED))
        .values(
            status=Status.CANCELLED.value, next_attempt_at=None, lease_until=None, updated_at=now
        )
    )
    async with db.engine.begin() as conn:
        return (await conn.execute(statement)).rowcount


async def delivery_counts(db: Database, campaign_id: uuid.UUID) -> dict[str, int]:
    """The campaign's deliveries by status (read through the campaign's index)."""
    return await _counted(db, delivery.c.status, delivery.c.campaign_id == campaign_id)


async def skip_reasons(db: Database, campaign_id: uuid.UUID) -> dict[str, int]:
    skipped = delivery.c.status == Status.SKIPPED.value
    found = await _counted(
        db, delivery.c.skip_reason, delivery.c.campaign_id == campaign_id, skipped
    )
    return {reason or "unknown": count for reason, count in found.items()}


async def _counted(
    db: Database, column: sa.Column[Any], *where: sa.ColumnElement[bool]
) -> dict[Any, int]:
    query = sa.select(column, sa.func.count()).where(*where).group_by(column)
    async with db.engine.connect() as conn:
        return {value: int(count) for value, count in await conn.execute(query)}


# Cancelled campaigns are remembered this long by dispatchers: past it, none of their
# deliveries can still be in flight (a lease is minutes at most).
CANCELLED_MEMORY = timedelta(days=2)


async def cancelled_since(db: Database, since: datetime) -> set[uuid.UUID]:
    query = sa.select(campaign.c.id).where(
        campaign.c.status == CampaignStatus.CANCELLED.value, campaign.c.updated_at >= since
    )
    async with db.engine.connect() as conn:
        return set(await conn.scalars(query))


async def paused(db: Database) -> set[uuid.UUID]:
    query = sa.select(campaign.c.id).where(campaign.c.status == CampaignStatus.PAUSED.value)
    async with db.engine.connect() as conn:
        return set(await conn.scalars(query))


class CancelledCampaigns:
    """The ids of recently cancelled campaigns, and of paused ones, as a dispatcher knows
    them: a delivery of a cancelled one is dropped before its provider is called, one of a
    paused one given back (``paused``). ``refresh`` runs every ``interval`` seconds (a task
    of the dispatcher), so what a dispatcher knows is at most that stale."""

    def __init__(self, db: Database, interval: float = 0.5) -> None:
        self.db = db
        self.interval = interval
        self._ids: frozenset[uuid.UUID] = frozenset()
        self.paused: frozenset[uuid.UUID] = frozenset()
        self.refreshed_at = 0.0  # time.monotonic() of the last refresh

    def __contains__(self, campaign_id: object) -> bool:
        return campaign_id in self._ids

    async def refresh(self, now: datetime) -> None:
        self._ids = frozenset(await cancelled_since(self.db, now - CANCELLED_MEMORY))
        self.paused = frozenset(await paused(self.db))
        self.refreshed_at = time.monotonic()
