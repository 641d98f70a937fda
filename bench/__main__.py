"""``python -m bench``: measure tidings on PostgreSQL against raw baselines, write the table.

Creates the scratch database, starts ``tidings api`` and ``tidings simulate`` on free ports,
runs every measurement ``--repeat`` times (tidings, baseline and pgbench alternating), reads
each process's peak memory, drops the database, prints the table and writes it, with the
command and the machine, to ``docs/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import os
import re
import shlex
import sys
import tempfile
import time
from pathlib import Path

import asyncpg

from bench import database, footprint, report, simulated, suite
from bench.accept import clients
from bench.api_server import api_process
from bench.config import BenchConfig
from bench.dispatch import dispatch_settings
from bench.memory import Reading
from tidings.service import Service, providers_from_settings

DEFAULT_OUT = Path("docs/benchmarks.md")

# Command-line option -> BenchConfig field.
_SIZES = {
    "notifications": "singles",
    "batch_notifications": "batched",
    "deliveries": "deliveries",
    "concurrency": "concurrency",
    "batch_size": "batch_size",
    "batch_concurrency": "batch_concurrency",
    "claim_batch": "claim_batch",
    "lane_concurrency": "lane_concurrency",
    "sim_latency_ms": "sim_latency_ms",
    "sim_lane_concurrency": "sim_lane_concurrency",
    "sim_deliveries": "sim_deliveries",
    "repeat": "repeat",
    "database": "database",
    "admin_url": "admin_url",
}


def _parser() -> argparse.ArgumentParser:
    full = BenchConfig()
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    add = parser.add_argument
    add(
        "--notifications",
        type=int,
        metavar="N",
        help=f"notifications sent one per request [{full.singles:,}]",
    )
    add(
        "--batch-notifications",
        type=int,
        metavar="N",
        help=f"notifications sent in batches [{full.batched:,}]",
    )
    add(
        "--deliveries",
        type=int,
        metavar="N",
        help=f"deliveries the dispatcher sends [{full.deliveries:,}]",
    )
    add(
        "--concurrency",
        type=int,
        metavar="N",
        help=f"concurrent clients for single requests [{full.concurrency}]",
    )
    add(
        "--batch-size",
        type=int,
        metavar="N",
        help=f"notifications per batch, at most 1,000 [{full.batch_size:,}]",
    )
    add(
        "--batch-concurrency",
        type=int,
        metavar="N",
        help=f"batch requests in flight [{full.batch_concurrency}]",
    )
    add(
        "--claim-batch",
        type=int,
        metavar="N",
        help=f"the NORMAL lane's claim batch, and the baseline's [{full.claim_batch}]",
    )
    add(
        "--lane-concurrency",
        type=int,
        metavar="N",
        help=f"the NORMAL lane's sends in flight [{full.lane_concurrency}]",
    )
    add(
        "--sim-latency-ms",
        type=float,
        metavar="MS",
        help=f"the simulated SendGrid's latency per request [{full.sim_latency_ms:g}]",
    )
    add(
        "--sim-deliveries",
        type=int,
        metavar="N",
        help=f"deliveries sent in the simulated-SendGrid row, both sides [{full.sim_deliveries:,}]",
    )
    add(
        "--sim-lane-concurrency",
        type=int,
        metavar="N",
        help="the NORMAL lane's sends in flight in the simulated-SendGrid row, both sides "
        f"[{full.sim_lane_concurrency}]",
    )
    add(
        "--repeat",
        type=int,
        metavar="N",
        help=f"repetitions per measurement; medians are reported [{full.repeat}]",
    )
    add(
        "--quick",
        action="store_true",
        help="a smoke run: small sizes, one repetition; writes a file only with --out",
    )
    add(
        "--out",
        type=Path,
        metavar="PATH",
        help=f"where to write the results [{DEFAULT_OUT}; none with --quick]",
    )
    add("--database", metavar="NAME", help=f"scratch database to create and drop [{full.database}]")
    add(
        "--admin-url",
        metavar="URL",
        help="PostgreSQL URL to create the database through [$TIDINGS_BENCH_PG or "
        f"{full.admin_url}]",
    )
    return parser


def config_from(args: argparse.Namespace) -> BenchConfig:
    base = BenchConfig.quick() if args.quick else BenchConfig()
    given = {field: getattr(args, option) for option, field in _SIZES.items()}
    config = dataclasses.replace(base, **{k: v for k, v in given.items() if v is not None})
    if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", config.database):
        raise SystemExit("--database must be a plain lower-case PostgreSQL identifier")
    if not 1 <= config.batch_size <= 1_000:
        raise SystemExit("--batch-size must be between 1 and 1,000 (the API's batch limit)")
    sizes = (config.singles, config.batched, config.deliveries, config.sim_deliveries)
    if min(*sizes, config.sim_lane_concurrency, config.repeat) < 1:
        raise SystemExit("sizes and --repeat must be at least 1")
    return config


def command_line() -> str:
    """How this run was started, as someone would type it from the repository root."""
    python = Path(sys.executable)
    with contextlib.suppress(ValueError):
        python = python.relative_to(Path.cwd())
    return shlex.join([str(python), "-m", "bench", *sys.argv[1:]])


Results = tuple[list[report.Measurement], dict[str, str], list[Reading]]


async def run(config: BenchConfig) -> Results:
    """Everything between creating and dropping the scratch database."""
    await database.create(config)
    try:
        return await _measure(config)
    finally:
        await database.drop(config)


async def _measure(config: BenchConfig) -> Results:
    url = config.database_url
    settings = dispatch_settings(url, config.claim_batch, config.lane_concurrency)
    service = Service.from_settings(settings)
    connections = max(config.concurrency, config.batch_concurrency)
    pool: asyncpg.Pool = await asyncpg.create_pool(url, min_size=2, max_size=connections + 1)
    try:
        with tempfile.TemporaryDirectory(prefix="tidings-bench-") as scratch:
            async with (
                api_process(url, Path(scratch) / "api.log") as (base_url, api),
                clients(base_url, connections) as http,
                simulated.running_simulator(Path(scratch), config.sim_latency_ms, url) as sim,
            ):
                sim_settings = simulated.sendgrid_settings(
                    dispatch_settings(url, config.claim_batch, config.sim_lane_concurrency),
                    sim,
                    config.sim_lane_concurrency,
                )
                sim_service = Service.from_settings(sim_settings)
                sim_providers = providers_from_settings(sim_settings)
                try:
                    resources = suite.Resources(
                        config, pool, http, service, sim_service, sim_providers, sim
                    )
                    cases = suite.cases(resources)
                    await suite.warm_up(cases, pool)
                    await suite.measure(cases, config.repeat, pool)
                    memory = await footprint.readings(resources, api.pid, Path(scratch))
                finally:
                    await sim_providers.close()
                    await sim_service.close()
        return [case.measurement for case in cases], await database.facts(pool), memory
    finally:
        await pool.close()
        await service.close()


PROCESSES = (
    "`tidings api` (one process, default settings) for intake; `tidings simulate` (one "
    "process) as SendGrid; the bench process runs the HTTP clients, the dispatcher and the "
    "asyncpg baselines; `pgbench` (its own process, 2 threads) the pgbench baselines; "
    "PostgreSQL on the same machine"
)


def _load() -> str:
    return f"{os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg") else "?"


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    config = config_from(args)
    out: Path | None = args.out or (None if args.quick else DEFAULT_OUT)
    started, clock, load_before = report.now(), time.perf_counter(), _load()
    measurements, postgres, memory = asyncio.run(run(config))
    info = report.RunInfo(
        command=command_line(),
        started=started,
        seconds=time.perf_counter() - clock,
        repeat=config.repeat,
        postgres=postgres,
        settings={
            "Processes": PROCESSES,
            "Load average (1 min) at start / end": f"{load_before} / {_load()}",
        },
        memory=memory,
    )
    print(report.table(measurements))
    print()
    print(report.memory_table(memory))
    print(f"\n{config.repeat} repetitions, {info.seconds:.0f} s; command: {info.command}")
    if out is not None:
        report.write(out, measurements, info)
        print(f"written to {out}")
    missed = [m.name for m in measurements if m.passed is False]
    missed += [f"memory of {r.process}" for r in memory if r.passed is False]
    if missed:
        print(f"target missed: {', '.join(missed)}", file=sys.stderr)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
