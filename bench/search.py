"""``python -m bench.search``: the search of notifications (GET /v1/notifications) on a
PostgreSQL database holding 10M deliveries on day partitions.

A scratch database, migrated (day partitions, the default), filled by SQL (not the API):
``--deliveries / 2`` notifications spread evenly over the past ``--days`` days, each with an
email and an SMS delivery (about 1 in 43 FAILED, the rest SENT), for ``--users`` users (so
each user has about ``deliveries / 2 / users`` notifications across every day), then
VACUUM ANALYZE. ``--keep`` reuses a database already filled with the same numbers.

Each measurement runs ``--samples`` searches for random users (or their email address), one
at a time, each timed around the service call the route makes
(``services.notifications.search_notifications``: the page and its deliveries, one
snapshot) and, separately, around the whole HTTP request through the app (in process, no
network): p50, p99 and the slowest.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

import asyncpg
import httpx
import sqlalchemy as sa

from tidings.api.app import create_app
from tidings.service import Service
from tidings.services.notifications import Search, search_notifications
from tidings.settings import Settings
from tidings.store.engine import Database, connect
from tidings.store.migrate import upgrade
from tidings.store.partitions import ensure_partitions

AHEAD_DAYS = 7
CHUNK = 50_000  # notifications per INSERT statement

# A UUID v7 made in SQL: the millisecond in the top 48 bits, the rest from a seed's md5.
_V7 = """
CREATE OR REPLACE FUNCTION bench_v7(ms bigint, seed text) RETURNS uuid
LANGUAGE sql IMMUTABLE AS $$
SELECT (lpad(to_hex(ms), 12, '0') || '7' || substr(md5(seed), 1, 3) || '8'
        || substr(md5(seed), 4, 15))::uuid $$
"""

# One chunk of a day: $1 the day's first millisecond, $2 milliseconds between two
# notifications, $3 the day's number, $4 the first index, $5 the count, $6 the users.
# A delivery's id is made in its notification's millisecond, as tidings makes it.
_FILL = """
WITH n AS (
    INSERT INTO notification (id, namespace, idempotency_key, request_hash, type, category,
                              priority, user_id, data, locale, created_at)
    SELECT bench_v7($1 + i * $2, $3::bigint || '-' || i), 'default',
           'bench-' || $3::bigint || '-' || i, md5(i::text) || md5($3::bigint || '-' || i),
           CASE WHEN i % 10 = 0 THEN 'password.reset' ELSE 'order.confirmed' END,
           'transactional', 'NORMAL', 'user-' || ((i * 7919 + $3::bigint * 31) % $6::bigint),
           '{}'::jsonb, 'en', to_timestamp(($1 + i * $2) / 1000.0)
    FROM generate_series($4::bigint, $4 + $5 - 1) AS i
    RETURNING id, user_id, created_at
)
INSERT INTO delivery (id, notification_id, channel, address, priority, category, status,
                      attempts, provider, failure_kind, created_at, sent_at, updated_at)
SELECT (substr(replace(n.id::text, '-', ''), 1, 12) || '7'
        || substr(md5(c.channel || n.id::text), 1, 3) || '8'
        || substr(md5(c.channel || n.id::text), 4, 15))::uuid,
       n.id, c.channel,
       CASE c.channel WHEN 'email' THEN n.user_id || '@example.com'
            ELSE '+1555' || lpad(substr(n.user_id, 6), 7, '0') END,
       'NORMAL', 'transactional',
       CASE WHEN get_byte(decode(md5(n.id::text), 'hex'), 0) < 6 THEN 'FAILED' ELSE 'SENT' END,
       1, c.channel || '-main',
       CASE WHEN get_byte(decode(md5(n.id::text), 'hex'), 0) < 6 THEN 'permanent' END,
       n.created_at, n.created_at + interval '1 second', n.created_at + interval '1 second'
FROM n CROSS JOIN (VALUES ('email'), ('sms')) AS c(channel)
"""


async def prepare(admin_url: str, name: str, args: argparse.Namespace) -> str:
    url = sa.make_url(admin_url).set(database=name).render_as_string(False)
    admin = await asyncpg.connect(admin_url)
    try:
        exists = await admin.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name)
        if exists and args.keep:
            db = connect(url)
            try:
                async with db.asyncpg() as conn:
                    count = await conn.fetchval("SELECT count(*) FROM delivery")
            finally:
                await db.dispose()
            if count == _per_day(args) * args.days * 2:
                print(f"reusing {name}: {count:,} deliveries", flush=True)
                return url
        await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        await admin.execute(f"CREATE DATABASE {name}")
    finally:
        await admin.close()
    db = connect(url)
    try:
        await upgrade(db, partitions_ahead=AHEAD_DAYS)
        today = datetime.now(UTC).date()
        await ensure_partitions(db, today - timedelta(days=args.days), args.days + AHEAD_DAYS)
        await _fill(db, args)
    finally:
        await db.dispose()
    return url


def _per_day(args: argparse.Namespace) -> int:
    """Notifications per day (two deliveries each)."""
    return int(args.deliveries // 2 // args.days)


async def _fill(db: Database, args: argparse.Namespace) -> None:
    per_day = _per_day(args)
    gap = 86_400_000 // per_day
    started = time.monotonic()
    async with db.asyncpg() as conn:
        await conn.execute(_V7)
        # Bulk rows, not status changes: the event feed's triggers are not run.
        await conn.execute("SET session_replication_role = replica")
        for back in range(args.days, 0, -1):
            day = datetime.now(UTC).date() - timedelta(days=back)
            first_ms = int(datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp() * 1000)
            for start in range(0, per_day, CHUNK):
                count = min(CHUNK, per_day - start)
                await conn.execute(_FILL, first_ms, gap, back, start, count, args.users)
            print(f"day -{back} filled, {time.monotonic() - started:.0f} s", flush=True)
        await conn.execute("RESET session_replication_role")
        await conn.execute("VACUUM ANALYZE notification")
        await conn.execute("VACUUM ANALYZE delivery")
    print(f"filled and vacuumed in {time.monotonic() - started:.0f} s", flush=True)


# The route's two statements for a user's last 50 in PL/pgSQL (whose static statements keep
# their plans, as a prepared statement does), timed in the server: what the database takes,
# without the client's process, its event loop or the network.
_SERVER_SIDE = """
CREATE OR REPLACE FUNCTION bench_last_50(who text) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE page uuid[]; found integer;
BEGIN
    SELECT array_agg(id) INTO page FROM (
        SELECT id FROM notification WHERE namespace = 'default' AND user_id = who
        ORDER BY id DESC LIMIT 51) AS newest;
    SELECT count(*) INTO found FROM unnest(page) AS n(id)
        CROSS JOIN LATERAL (SELECT * FROM delivery WHERE notification_id = n.id) AS d;
    RETURN found;
END $$
"""
_SERVER_TIMES = """
CREATE TEMP TABLE IF NOT EXISTS bench_times (ms double precision);
TRUNCATE bench_times;
DO $$
DECLARE began timestamptz; n integer;
BEGIN
    FOR n IN 1..{samples} LOOP
        began := clock_timestamp();
        PERFORM bench_last_50('user-' || floor(random() * {users})::int);
        INSERT INTO bench_times VALUES (
            extract(epoch FROM clock_timestamp() - began) * 1000);
    END LOOP;
END $$
"""


async def server_side(url: str, args: argparse.Namespace) -> str:
    """A user's last 50 timed inside PostgreSQL: p50, p99 and the slowest, in ms."""
    db = connect(url)
    try:
        async with db.asyncpg() as conn:
            await conn.execute(_SERVER_SIDE)
            await conn.execute(_SERVER_TIMES.format(samples=50, users=args.users))  # warm-up
            await conn.execute(_SERVER_TIMES.format(samples=args.samples, users=args.users))
            row = await conn.fetchrow(
                "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY ms), "
                "percentile_cont(0.99) WITHIN GROUP (ORDER BY ms), max(ms) FROM bench_times"
            )
    finally:
        await db.dispose()
    return f"{row[0]:.1f} | {row[1]:.1f} | {row[2]:.1f}"


def _figures(samples: list[float]) -> str:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"{statistics.median(ordered):.1f} | {p99:.1f} | {ordered[-1]:.1f}"


async def _timed(samples: int, call: Callable[[int], Awaitable[object]]) -> list[float]:
    for n in range(min(50, samples)):  # warm the pool, the plans and the cache
        await call(n)
    found = []
    for n in range(samples):
        begun = time.perf_counter()
        await call(n)
        found.append((time.perf_counter() - begun) * 1000)
    return found


async def measure(url: str, args: argparse.Namespace) -> list[tuple[str, str, str]]:
    service = Service.from_settings(Settings(database_url=url, secret_key="bench"))
    rng = random.Random(29)
    users = [f"user-{rng.randrange(args.users)}" for _ in range(args.samples + 50)]
    cases: dict[str, Callable[[int], Search]] = {
        "a user's last 50": lambda n: Search("default", 50, user_id=users[n]),
        "an address's last 50 (email)": lambda n: Search(
            "default", 50, address=f"{users[n]}@example.com"
        ),
        "a user's last 50 of a type": lambda n: Search(
            "default", 50, user_id=users[n], type="password.reset"
        ),
        "a user's FAILED deliveries": lambda n: Search(
            "default", 50, user_id=users[n], status="FAILED"
        ),
        "the newest 50, no filter": lambda n: Search("default", 50),
    }
    rows = []
    transport = httpx.ASGITransport(app=create_app(service))
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://tidings") as client:
            for name, build in cases.items():

                async def direct(n: int, build: Callable[[int], Search] = build) -> object:
                    return await search_notifications(service.db, build(n))

                async def http(n: int, build: Callable[[int], Search] = build) -> object:
                    answer = await client.get("/v1/notifications", params=_params(build(n)))
                    assert answer.status_code == 200, answer.text
                    return answer

                service_ms = _figures(await _timed(args.samples, direct))
                http_ms = _figures(await _timed(args.samples, http))
                rows.append((name, service_ms, http_ms))
                print(f"{name}: {service_ms} | {http_ms}", flush=True)
    finally:
        await service.close()
    return rows


def _params(search: Search) -> dict[str, str | int]:
    given = {"userId": search.user_id, "type": search.type, "status": search.status}
    given["address"] = search.address
    return {"limit": search.limit, **{k: v for k, v in given.items() if v is not None}}


def table(rows: list[tuple[str, str, str]]) -> str:
    lines = [
        "| Search | service p50 ms | p99 | max | HTTP p50 ms | p99 | max |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [f"| {name} | {service} | {http} |" for name, service, http in rows]
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench.search", description=__doc__.split("\n")[0]
    )
    add = parser.add_argument
    add("--deliveries", type=int, default=10_000_000, help="deliveries in all [10,000,000]")
    add("--users", type=int, default=100_000, help="users the notifications go to [100,000]")
    add("--days", type=int, default=30, help="past days the rows spread over [30]")
    add("--samples", type=int, default=1_000, help="searches per measurement [1,000]")
    add("--keep", action="store_true", help="reuse a database already filled alike")
    add("--server-only", action="store_true", help="only the timing inside PostgreSQL")
    add("--database", default="tidings_bench_search", help="the scratch database")
    add("--admin-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    started = time.monotonic()
    url = asyncio.run(prepare(args.admin_url, args.database, args))
    inside = asyncio.run(server_side(url, args))
    print(f"a user's last 50, inside PostgreSQL (p50 | p99 | max ms): {inside}", flush=True)
    if args.server_only:
        return 0
    rows = asyncio.run(measure(url, args))
    print(table(rows))
    print(f"a user's last 50, inside PostgreSQL (p50 | p99 | max ms): {inside}")
    print(f"\n{time.monotonic() - started:.0f} s in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
