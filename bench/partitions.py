"""``python -m bench.partitions``: accept and dispatch throughput on plain tables, on one
partition and on day partitions (the default layout on PostgreSQL), in the same run.

Three scratch databases with the same rows: ``plain``, the tables as migration 0026 leaves
a database too large to convert (migrated with ``day_partitions=False``); ``single``,
converted from plain tables by `tidings partitions enable`'s code, then one partition per
table from MINVALUE to MAXVALUE (the cost of partitioning itself); ``days``, converted,
with the layout a month of retention gives (30 past days holding finished rows, today, 7
days ahead: 38 partitions per table). Each repetition, for each layout in turn: POST
notifications one per request to a ``tidings api`` subprocess (timed), then run tidings'
Dispatcher in this process until all are SENT (timed). Medians, and ratios to ``plain``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import secrets
import statistics
import sys
import tempfile
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import sqlalchemy as sa

from bench.accept import clients, post_singles
from bench.api_server import running_api
from bench.database import register_type
from bench.dispatch import dispatch_settings, run_dispatcher
from bench.workload import TEMPLATE, TYPE_BODY, TYPE_NAME, items
from tidings.clock import utcnow
from tidings.priorities import Priority
from tidings.service import Service
from tidings.states import Status
from tidings.store.engine import Database, connect
from tidings.store.intake import DeliveryDraft, NotificationDraft, accept
from tidings.store.migrate import upgrade
from tidings.store.partitions import (
    PARTITIONED,
    attached,
    enable_partitions,
    ensure_partitions,
    partition_name,
)

PAST_DAYS = 30
AHEAD_DAYS = 7
LAYOUTS = ("plain", "single", "days")
HEADERS = {"plain": "plain", "single": "1 partition", "days": "38 day partitions"}


@dataclass
class Figures:
    accept: list[float] = field(default_factory=list)  # notifications/s
    dispatch: list[float] = field(default_factory=list)  # deliveries/s


def _v7_at(at: datetime) -> uuid.UUID:
    """A UUID v7 made at ``at`` (past days' rows)."""
    ms = int(at.timestamp() * 1000)
    rand = secrets.randbits(74)
    return uuid.UUID(
        int=(ms << 80) | (7 << 76) | ((rand >> 62) << 64) | (2 << 62) | (rand & ((1 << 62) - 1))
    )


def _finished(at: datetime, key: str) -> NotificationDraft:
    item = DeliveryDraft(_v7_at(at), "email", f"{key}@example.com", Status.SKIPPED, "suppressed")
    return NotificationDraft(
        id=_v7_at(at),
        namespace="default",
        idempotency_key=key,
        request_hash="past",
        type=TYPE_NAME,
        category="transactional",
        priority=Priority.NORMAL,
        user_id=None,
        data={"orderId": 1},
        locale=None,
        send_at=None,
        deliveries=[item],
    )


async def _one_partition(db: Database) -> None:
    """Replace each table's day partitions by one covering every id."""
    async with db.asyncpg() as conn:
        found = await attached(conn)
        for table in reversed(PARTITIONED):
            for day in found[table]:
                await conn.execute(f"DROP TABLE {partition_name(table, day)}")
        for table in PARTITIONED:
            await conn.execute(
                f"CREATE TABLE {table}_pall PARTITION OF {table} "
                "FOR VALUES FROM (MINVALUE) TO (MAXVALUE)"
            )


async def prepare(admin_url: str, name: str, layout: str, per_day: int) -> str:
    url = sa.make_url(admin_url).set(database=name).render_as_string(False)
    admin = await asyncpg.connect(admin_url)
    try:
        await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        await admin.execute(f"CREATE DATABASE {name}")
    finally:
        await admin.close()
    db = connect(url)
    try:
        # Plain tables, each layout then made from them by the conversion's code.
        await upgrade(db, partitions_ahead=AHEAD_DAYS, day_partitions=False)
        await register_type(db, TYPE_NAME, TYPE_BODY, TEMPLATE)
        today = utcnow().date()
        if layout != "plain":
            await enable_partitions(db, today, AHEAD_DAYS)
        if layout == "single":
            await _one_partition(db)
        elif layout == "days":
            await ensure_partitions(db, today - timedelta(days=PAST_DAYS), PAST_DAYS + AHEAD_DAYS)
        await _fill_past(db, per_day)
        async with db.asyncpg() as conn:
            await conn.execute("ANALYZE")
            await conn.execute("CHECKPOINT")
    finally:
        await db.dispose()
    return url


async def _fill_past(db: Database, per_day: int) -> None:
    now = utcnow()
    for back in range(1, PAST_DAYS + 1):
        at = now - timedelta(days=back)
        for start in range(0, per_day, 1_000):
            drafts = [
                _finished(at, f"past-{back}-{n}") for n in range(start, min(per_day, start + 1_000))
            ]
            await accept(db, drafts, at)


async def _round(
    url: str, base_url: str, count: int, concurrency: int, tag: str
) -> tuple[float, float]:
    """One accept run and one dispatch run on one layout; their rates."""
    async with clients(base_url, concurrency) as http:
        seconds = await post_singles(http, items(count, tag))
    accept_rate = count / seconds
    service = Service.from_settings(dispatch_settings(url, 100, 64))
    pool = await asyncpg.create_pool(url, min_size=1, max_size=2)
    try:
        dispatch_rate = count / await run_dispatcher(service, pool)
    finally:
        await pool.close()
        await service.close()
    return accept_rate, dispatch_rate


async def run(args: argparse.Namespace) -> dict[str, Figures]:
    names = {layout: f"{args.database}_{layout}" for layout in LAYOUTS}
    urls = {
        layout: await prepare(args.admin_url, names[layout], layout, args.past_rows)
        for layout in LAYOUTS
    }
    figures = {layout: Figures() for layout in LAYOUTS}
    try:
        with tempfile.TemporaryDirectory(prefix="tidings-bench-") as scratch:
            async with contextlib.AsyncExitStack() as stack:
                apis = {
                    layout: await stack.enter_async_context(
                        running_api(urls[layout], Path(scratch) / f"{layout}.log")
                    )
                    for layout in LAYOUTS
                }
                await _measure(args, urls, apis, figures)
    finally:
        admin = await asyncpg.connect(args.admin_url)
        try:
            for name in names.values():
                await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        finally:
            await admin.close()
    return figures


async def _measure(
    args: argparse.Namespace,
    urls: dict[str, str],
    apis: dict[str, str],
    figures: dict[str, Figures],
) -> None:
    for layout in LAYOUTS:  # warm-up, not counted
        await _round(urls[layout], apis[layout], args.warmup, args.concurrency, f"w-{layout}")
    for rep in range(args.repeat):
        order = LAYOUTS if rep % 2 == 0 else tuple(reversed(LAYOUTS))  # no layout always first
        for layout in order:
            tag = f"r{rep}-{layout}"
            rates = await _round(
                urls[layout], apis[layout], args.notifications, args.concurrency, tag
            )
            figures[layout].accept.append(rates[0])
            figures[layout].dispatch.append(rates[1])


def table(figures: dict[str, Figures]) -> str:
    columns = " | ".join(HEADERS[layout] for layout in LAYOUTS)
    ratios = " | ".join(f"{HEADERS[layout]} / plain" for layout in LAYOUTS[1:])
    lines = [f"| Measurement | {columns} | {ratios} |", "|---" * (2 * len(LAYOUTS)) + "|"]
    for label, pick in (
        ("Accept, single requests (notifications/s)", "accept"),
        ("Dispatch, no-op provider (deliveries/s)", "dispatch"),
    ):
        medians = {layout: statistics.median(getattr(figures[layout], pick)) for layout in LAYOUTS}
        rates = " | ".join(f"{medians[layout]:,.0f}" for layout in LAYOUTS)
        plain = medians["plain"]
        shares = " | ".join(f"{medians[layout] / plain:.2f}" for layout in LAYOUTS[1:])
        lines.append(f"| {label} | {rates} | {shares} |")
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench.partitions", description=__doc__.split("\n")[0]
    )
    add = parser.add_argument
    add("--notifications", type=int, default=5_000, help="per run and layout [5,000]")
    add("--past-rows", type=int, default=2_000, help="finished notifications per past day [2,000]")
    add("--concurrency", type=int, default=16, help="concurrent HTTP clients [16]")
    add("--repeat", type=int, default=3, help="runs per layout; medians reported [3]")
    add("--warmup", type=int, default=500, help="notifications of the unmeasured first run [500]")
    add("--database", default="tidings_bench_parts", help="prefix of the scratch databases")
    add("--admin-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    started = datetime.now(UTC)
    figures = asyncio.run(run(args))
    print(table(figures))
    seconds = (datetime.now(UTC) - started).total_seconds()
    print(f"\n{args.repeat} repetitions per layout, {seconds:.0f} s; every run: {figures}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
