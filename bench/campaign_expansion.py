"""The expansion of one campaign: tidings' ``Expander.step()`` and its raw baseline.

Both expand the same audience (a topic's followers, each with an email address) into the
same rows: per user one notification (key ``campaign:<id>:<user>``, the campaign's data,
send time spread over the window) and one PENDING email delivery, ids from
``tidings.ids.new_id`` (UUID v7), one transaction per page of ``page_size`` users.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import json
import random
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import asyncpg

from bench.campaign_data import CAMPAIGN_DATA, PROMO, TOPIC
from tidings.campaigns import expansion as tidings_expansion
from tidings.campaigns.create import CampaignRequest, Registry, create
from tidings.campaigns.expander import Expander
from tidings.clock import utcnow
from tidings.ids import new_id
from tidings.service import Service
from tidings.store import audiences, preferences, suppressions, users
from tidings.store import campaigns as campaign_store
from tidings.store.campaigns import Campaign

NAMESPACE = "default"
# Inside tidings' insert_postgres, in this task (the expander may store one page in a task
# while it builds the next).
_INSERTING: contextvars.ContextVar[bool] = contextvars.ContextVar("inserting", default=False)


async def new_campaign(service: Service, key: str) -> Campaign:
    """The campaign row, stored through tidings' own create (not timed, for either side)."""
    registry = Registry(service.db, service.types, service.templates)
    request = CampaignRequest(type=PROMO, audience={"topic": TOPIC}, data=dict(CAMPAIGN_DATA))
    campaign, created = await create(registry, request, NAMESPACE, key, utcnow())
    assert created, f"campaign key {key!r} used twice"
    return campaign


# --- where tidings' time goes: wall-clock timers around its calls ---------------------------

# (module or class, attribute, label): the calls an expansion makes, outermost first.
_TIMED: list[tuple[Any, str, str]] = [
    (campaign_store, "claim_due", "start"),
    (audiences, "size", "start"),
    (campaign_store, "set_audience_size", "start"),
    (campaign_store, "get", "start"),
    (audiences, "page", "page"),
    (users, "get_users", "profiles"),
    (tidings_expansion, "skip_unwanted", "policy"),
    (preferences, "of_users", "policy_sql"),
    (suppressions, "suppressed", "policy_sql"),
    (tidings_expansion.Planner, "drafts", "drafts"),
    (campaign_store, "store_page", "store"),
    (campaign_store, "insert_postgres", "insert"),
]


@dataclass
class Phases:
    """Seconds spent inside each timed call (inclusive), and in the SQL of the inserts."""

    seconds: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    calls: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def _async(self, label: str, function: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(function)
        async def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            token = _INSERTING.set(True) if label == "insert" else None
            try:
                return await function(*args, **kwargs)
            finally:
                if token is not None:
                    _INSERTING.reset(token)
                self.seconds[label] += time.perf_counter() - started
                self.calls[label] += 1

        return timed

    def _sync(self, label: str, function: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(function)
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.seconds[label] += time.perf_counter() - started
                self.calls[label] += 1

        return timed

    def _sql(self, function: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(function)
        async def timed(conn: Any, *args: Any, **kwargs: Any) -> Any:
            if not _INSERTING.get():
                return await function(conn, *args, **kwargs)
            started = time.perf_counter()
            try:
                return await function(conn, *args, **kwargs)
            finally:
                self.seconds["insert_sql"] += time.perf_counter() - started

        return timed

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        """Timers on tidings' calls for the ``with`` block (a few per page: negligible)."""
        saved: list[tuple[Any, str, Any]] = []
        try:
            for owner, name, label in _TIMED:
                original = getattr(owner, name)
                saved.append((owner, name, original))
                wrap = self._sync if name == "drafts" else self._async
                setattr(owner, name, wrap(label, original))
            for name in ("fetch", "execute"):
                original = getattr(asyncpg.Connection, name)
                saved.append((asyncpg.Connection, name, original))
                setattr(asyncpg.Connection, name, self._sql(original))
            yield
        finally:
            for owner, name, original in reversed(saved):
                setattr(owner, name, original)

    def breakdown(self, total: float) -> list[tuple[str, float]]:
        """Exclusive seconds per part of the expansion, in the order a page runs them."""
        s = self.seconds
        parts = [
            ("claim, count the audience (`claim_due`, `audiences.size`)", s["start"]),
            ("audience page of ids (`audiences.page`, SQLAlchemy)", s["page"]),
            ("profiles (`users.get_users`: `SELECT ... WHERE id = ANY($1)`, rows)", s["profiles"]),
            (
                "policy reads (`preferences.of_users`, `suppressions.suppressed`)",
                s["policy_sql"],
            ),
            ("policy in Python (`skip_unwanted` less its reads)", s["policy"] - s["policy_sql"]),
            ("drafts in Python (`Planner.drafts`: ids, send times, dataclasses)", s["drafts"]),
            (
                "insert rows built in Python (`insert_postgres` less its SQL)",
                s["insert"] - s["insert_sql"],
            ),
            ("the two unnest INSERTs (asyncpg encode + server)", s["insert_sql"]),
            (
                "cursor update, commit, connection (`store_page` less inserts)",
                s["store"] - s["insert"],
            ),
        ]
        other = total - sum(v for _, v in parts)
        if other >= 0:  # negative when storing a page overlaps building the next one
            parts.append(("other (between the timed calls)", other))
        return parts


# --- tidings ---------------------------------------------------------------------------------


async def expand_tidings(
    service: Service, pool: asyncpg.Pool, key: str, phases: Phases | None = None
) -> float:
    """Seconds of ``Expander.step()``: from the claim until the campaign is SENDING."""
    campaign = await new_campaign(service, key)
    expander = Expander(
        service.db, service.types, service.wakeup, service.settings.campaigns, "bench-expander"
    )
    timers = phases.active() if phases is not None else contextlib.nullcontext()
    started = time.perf_counter()
    with timers:
        claimed = await expander.step()
    seconds = time.perf_counter() - started
    assert claimed, "the expander claimed no campaign"
    await _expect_sending(pool, campaign.id)
    return seconds


async def _expect_sending(pool: asyncpg.Pool, campaign_id: uuid.UUID) -> None:
    async with pool.acquire() as conn:
        status = await conn.fetchval("SELECT status FROM campaign WHERE id = $1", campaign_id)
    if status != "SENDING":
        raise RuntimeError(f"campaign {campaign_id} is {status} after its expansion, not SENDING")


# --- the raw baseline ------------------------------------------------------------------------

_CLAIM = """
UPDATE campaign SET status = 'EXPANDING', expander = $2, lease_until = $3, started_at = $4,
    updated_at = $4
WHERE id = $1 AND status = 'SCHEDULED'
"""
_COUNT = "SELECT count(*) FROM topic_subscription WHERE topic = $1"
# The page with each user's address, in one query (tidings reads the ids, then the profiles).
_PAGE = """
SELECT s.user_id, p.email FROM topic_subscription AS s
LEFT JOIN user_profile AS p ON p.id = s.user_id
WHERE s.topic = $1 AND s.user_id > $2
ORDER BY s.user_id
LIMIT $3
"""
_NOTIFICATIONS = """
INSERT INTO notification (id, namespace, idempotency_key, request_hash, type, category, priority,
    user_id, data, locale, send_at, campaign_id, created_at)
SELECT u.id, u.namespace, u.idempotency_key, u.request_hash, u.type, u.category, u.priority,
    u.user_id, u.data::jsonb, u.locale, u.send_at, u.campaign_id, $13
FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
    $8::text[], $9::text[], $10::text[], $11::timestamptz[], $12::uuid[])
    AS u(id, namespace, idempotency_key, request_hash, type, category, priority, user_id, data,
        locale, send_at, campaign_id)
"""
# The keys first, as tidings inserts them (their own table: unique across day partitions).
_KEYS = """
INSERT INTO idempotency_key (namespace, idempotency_key, notification_id, request_hash,
    created_at)
SELECT u.namespace, u.idempotency_key, u.id, u.request_hash, $5
FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[])
    AS u(id, namespace, idempotency_key, request_hash)
ON CONFLICT (namespace, idempotency_key) DO NOTHING
"""
_DELIVERIES = """
INSERT INTO delivery (id, notification_id, channel, address, priority, category, status,
    next_attempt_at, skip_reason, campaign_id, attempts, created_at, updated_at)
SELECT u.id, u.notification_id, u.channel, u.address, u.priority, u.category, u.status,
    u.next_attempt_at, u.skip_reason, u.campaign_id, 0, $11, $11
FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
    $8::timestamptz[], $9::text[], $10::uuid[])
    AS u(id, notification_id, channel, address, priority, category, status, next_attempt_at,
        skip_reason, campaign_id)
"""
_ADVANCE = """
UPDATE campaign SET cursor = $2, expanded = expanded + $3, deliveries = deliveries + $4,
    audience_size = $5, lease_until = $6, updated_at = $7, status = $8
WHERE id = $1 AND status = 'EXPANDING'
"""


async def expand_raw(
    service: Service, pool: asyncpg.Pool, key: str, page_size: int, window: float
) -> float:
    """The same rows with plain asyncpg: claim, count, then per page one read of the ids with
    their addresses and one transaction of two ``INSERT ... SELECT FROM unnest`` and the
    cursor's update. No preference or suppression read, no SQLAlchemy, no drafts."""
    campaign = await new_campaign(service, key)
    rng = random.Random()
    started = time.perf_counter()
    async with pool.acquire() as conn:
        now = utcnow()
        await conn.execute(_CLAIM, campaign.id, "bench-raw", now + timedelta(seconds=30), now)
        size = await conn.fetchval(_COUNT, TOPIC)
        cursor, ordinal, data = "", 0, _data_json()
        while True:
            page = await conn.fetch(_PAGE, TOPIC, cursor, page_size)
            now = utcnow()
            n, d = _rows(campaign, page, ordinal, size, window, rng, data)
            last = len(page) < page_size
            async with conn.transaction():
                await conn.execute(_KEYS, *n[:4], now)
                await conn.execute(_NOTIFICATIONS, *n, now)
                await conn.execute(_DELIVERIES, *d, now)
                await conn.execute(
                    _ADVANCE,
                    campaign.id,
                    page[-1]["user_id"] if page else cursor,
                    len(page),
                    len(d[0]),
                    size,
                    now + timedelta(seconds=30),
                    now,
                    "SENDING" if last else "EXPANDING",
                )
            if last:
                break
            cursor, ordinal = page[-1]["user_id"], ordinal + len(page)
    seconds = time.perf_counter() - started
    await _expect_sending(pool, campaign.id)
    return seconds


def _data_json() -> str:
    """The campaign's data as tidings serialises it once per campaign."""
    return json.dumps(CAMPAIGN_DATA, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _rows(
    campaign: Campaign,
    page: list[asyncpg.Record],
    first: int,
    size: int,
    window: float,
    rng: random.Random,
    data: str,
) -> tuple[list[list[Any]], list[list[Any]]]:
    """The page's notification and delivery columns (arrays), as tidings builds them."""
    count = len(page)
    ids, keys, user_ids, send_ats = [], [], [], []
    delivery_ids, addresses, statuses, due, reasons = [], [], [], [], []
    start, prefix = campaign.send_at, f"campaign:{campaign.id}:"
    for index, record in enumerate(page):
        uid, email = record["user_id"], record["email"]
        notification_id = new_id()
        send_at = start + timedelta(seconds=window * (first + index + rng.random()) / size)
        ids.append(notification_id)
        keys.append(prefix + uid)
        user_ids.append(uid)
        send_ats.append(send_at)
        delivery_ids.append(new_id())
        addresses.append(email or "")
        statuses.append("PENDING" if email else "SKIPPED")
        due.append(send_at if email else None)
        reasons.append(None if email else "no_address")
    notifications = [
        ids,
        [campaign.namespace] * count,
        keys,
        [campaign.request_hash] * count,
        [campaign.type] * count,
        [campaign.category] * count,
        [campaign.priority] * count,
        user_ids,
        [data] * count,
        [None] * count,
        send_ats,
        [campaign.id] * count,
    ]
    deliveries = [
        delivery_ids,
        ids,
        ["email"] * count,
        addresses,
        [campaign.priority] * count,
        [campaign.category] * count,
        statuses,
        due,
        reasons,
        [campaign.id] * count,
    ]
    return notifications, deliveries
