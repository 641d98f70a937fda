"""Long fault runs (``make faults``): the outside trial's sequence at full length, then
``--schedules`` random schedules drawn from ``--seed`` (Kafka and direct mode in turn), each
on a fresh PostgreSQL database. Prints each schedule and what it left (deliveries by status,
repeats and how many of them are the documented case, 429s); exits 1 if any broke a promise.

    python -m tests.system.run --schedules 10 --seed 1 --count 10000
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import tempfile
from pathlib import Path

import asyncpg
import sqlalchemy as sa

from tests.system.fleet import KEY, FaultFleet, Report, run_schedule, unique_name
from tests.system.schedules import (
    DIRECT_ROLES,
    KAFKA_ROLES,
    Fault,
    random_schedule,
    trial_schedule,
)
from tidings.simulator.behaviour import Behaviour
from tidings.simulator.server import Simulator, SimulatorConfig
from tidings.store.engine import connect
from tidings.store.migrate import upgrade

ADMIN_URL = os.environ.get("TIDINGS_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")


async def fresh_database() -> str:
    name = unique_name("tidings_faults")
    conn = await asyncpg.connect(ADMIN_URL)
    try:
        await conn.execute(f"CREATE DATABASE {name}")
    finally:
        await conn.close()
    url = sa.make_url(ADMIN_URL).set(database=name).render_as_string(False)
    db = connect(url)
    try:
        await upgrade(db)
    finally:
        await db.dispose()
    return url


async def drop_database(url: str) -> None:
    conn = await asyncpg.connect(ADMIN_URL)
    try:
        await conn.execute(f"DROP DATABASE IF EXISTS {sa.make_url(url).database} WITH (FORCE)")
    finally:
        await conn.close()


async def one_run(
    mode: str, schedule: list[Fault], args: argparse.Namespace, workdir: Path
) -> Report:
    counts = {
        "otp": args.count // 10,
        "news": args.count * 3 // 10,
        "promo": args.count - args.count // 10 - args.count * 3 // 10,
    }
    behaviour = {"sendgrid": Behaviour(rate_limit=args.rate, dedup=False, latency_ms=2)}
    config = SimulatorConfig(credentials_dir=workdir, sendgrid_api_key=KEY, behaviours=behaviour)
    url = await fresh_database()
    try:
        async with (
            Simulator(config) as sim,
            FaultFleet(mode, url, workdir / "fleet", sim, args.rate) as fleet,
        ):
            report = await run_schedule(
                fleet, schedule, counts, args.submit_over, args.settle_within
            )
            if report.problems():
                print(fleet.logs(30), file=sys.stderr)
            return report
    finally:
        await drop_database(url)


def plans(args: argparse.Namespace) -> list[tuple[str, str, list[Fault]]]:
    """(title, mode, schedule) of every run asked for."""
    found = []
    if args.trial:
        found.append(("the trial's sequence", "kafka", trial_schedule()))
    modes = args.modes.split(",")
    for n in range(args.schedules):
        mode = modes[n % len(modes)]
        seed = args.seed + n
        roles = KAFKA_ROLES if mode == "kafka" else DIRECT_ROLES
        schedule = random_schedule(seed, args.duration, roles, kafka=mode == "kafka")
        found.append((f"random schedule, seed {seed}", mode, schedule))
    return found


async def main(args: argparse.Namespace) -> int:
    scratch = Path(tempfile.mkdtemp(prefix="tidings-faults-"))
    failed = 0
    for n, (title, mode, schedule) in enumerate(plans(args)):
        print(f"{title} ({mode} mode):", flush=True)
        report = await one_run(mode, schedule, args, scratch / f"run-{n}")
        print(report.summary(), flush=True)
        failed += bool(report.problems())
    print(f"logs: {scratch}")
    return 1 if failed else 0


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tests.system.run", description=__doc__)
    parser.add_argument("--schedules", type=int, default=10, help="random schedules to run")
    parser.add_argument("--seed", type=int, default=1, help="the first schedule's seed")
    parser.add_argument("--modes", default="kafka,direct", help="kafka, direct or both")
    parser.add_argument("--count", type=int, default=10_000, help="notifications per run")
    parser.add_argument("--rate", type=float, default=200.0, help="SendGrid's limit, per s")
    parser.add_argument("--duration", type=float, default=120.0, help="faults within (s)")
    parser.add_argument("--submit-over", type=float, default=30.0, help="load spread (s)")
    parser.add_argument("--settle-within", type=float, default=600.0, help="drain wait (s)")
    parser.add_argument("--no-trial", dest="trial", action="store_false")
    return parser.parse_args(argv)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    logging.getLogger("tidings").setLevel(logging.WARNING)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    sys.exit(asyncio.run(main(parse())))
