"""``python -m bench.kafka``: the Kafka transport against direct mode, on one machine.

1. HIGH latency while ``--low`` LOW emails drain through one SendGrid account (and the
   simulator's SendGrid) limited to ``--rate``/s: ``tidings api`` + ``tidings dispatch``
   (direct), then ``tidings api`` + ``tidings relay`` + ``tidings worker`` on tansu (kafka);
   HIGH POSTed at ``--high-rate``/s for ``--high-seconds`` (bench/kafka_latency.py).
2. One ``Relay`` in this process moving ``--relay-deliveries`` PENDING -> QUEUED through
   the broker, against the same claim in plain asyncpg with no publish (bench/kafka_relay.py).
3. Direct-mode throughput of 1, 2 and 4 ``tidings dispatch`` processes over a backlog of
   ``--deliveries`` with the no-op provider (bench/kafka_scaling.py).

Prints the figures and writes them as the ``kafka`` section of docs/benchmarks.md (the
other sections are kept).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import os
import shlex
import sys
import tempfile
import time
from pathlib import Path

import asyncpg

from bench import (
    campaign_data,
    database,
    kafka_latency,
    kafka_relay,
    kafka_scaling,
    report,
    sections,
)
from bench.config import BenchConfig
from bench.kafka_latency import LatencyRun, ModeFigures
from bench.kafka_procs import broker_binary, procs, start_simulator
from bench.kafka_report import (
    Results,
    latency_table,
    ms,
    relay_table,
    scaling_table,
    section,
    trace_tables,
)
from bench.kafka_scaling import ScalingFigures
from tidings.transport.settings import KafkaSettings

DEFAULT_OUT = Path("docs/benchmarks.md")
SECTION = "kafka"
MODES = ("direct", "kafka")


async def measure(args: argparse.Namespace) -> Results:
    config = BenchConfig(database=args.database, admin_url=args.admin_url)
    url = config.database_url
    await database.create(config)
    try:
        await campaign_data.register(url)
        pool: asyncpg.Pool = await asyncpg.create_pool(url, min_size=1, max_size=4)
        try:
            with tempfile.TemporaryDirectory(prefix="tidings-bench-kafka-") as scratch:
                run, modes, traced = await _latency(url, pool, Path(scratch), args)
                relay = await kafka_relay.measure(
                    url, pool, Path(scratch), args.relay_deliveries, args.relay_batch, args.repeat
                )
                scaling = ScalingFigures(args.deliveries, args.claim_batch, args.concurrency)
                await kafka_scaling.measure(url, pool, Path(scratch), scaling, args.repeat)
            facts = await database.facts(pool)
            return Results(run, modes, relay, scaling, facts, traced)
        finally:
            await pool.close()
    finally:
        await database.drop(config)


async def _latency(
    url: str, pool: asyncpg.Pool, scratch: Path, args: argparse.Namespace
) -> tuple[LatencyRun, dict[str, ModeFigures], dict[str, ModeFigures] | None]:
    """Each mode once on one simulator; with ``--trace``, each once more, traced."""
    run = LatencyRun(
        args.low, args.rate, args.high_rate, args.high_seconds, args.warmup, args.high_wait
    )
    modes: dict[str, ModeFigures] = {}
    traced: dict[str, ModeFigures] = {}
    with procs(scratch) as running:
        sim_url = await start_simulator(running, args.rate)
        for trace, mode in itertools.product([False, True] if args.trace else [False], MODES):
            workdir = Path(tempfile.mkdtemp(prefix=f"{mode}-", dir=scratch))
            figures = await kafka_latency.measure_mode(
                mode, url, pool, workdir, sim_url, run, trace
            )
            (traced if trace else modes)[mode] = figures
            label = f"{mode}{' (traced)' if trace else ''}"
            print(f"{label}: HIGH {ms(figures.p(0.5))} / {ms(figures.p(0.99))}", flush=True)
    return run, modes, traced or None


def command_line() -> str:
    python = Path(sys.executable)
    with contextlib.suppress(ValueError):
        python = python.relative_to(Path.cwd())
    return shlex.join([str(python), "-m", "bench.kafka", *sys.argv[1:]])


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench.kafka", description=__doc__.split("\n")[0]
    )
    add = parser.add_argument
    add("--low", type=int, default=100_000, help="LOW emails accepted before the drain [100,000]")
    add("--rate", type=float, default=500.0, help="the account's and simulator's limit/s [500]")
    add("--high-rate", type=float, default=10.0, help="HIGH POSTs per second [10]")
    add("--high-seconds", type=float, default=30.0, help="how long HIGH is offered [30]")
    add("--warmup", type=float, default=10.0, help="seconds of drain before HIGH starts [10]")
    add("--high-wait", type=float, default=30.0, help="wait for HIGH after the last POST [30]")
    add("--relay-deliveries", type=int, default=50_000, help="the relay's backlog [50,000]")
    relay_batch = KafkaSettings().relay_batch
    add("--relay-batch", type=int, default=relay_batch, help=f"kafka.relay_batch [{relay_batch}]")
    add("--deliveries", type=int, default=20_000, help="the dispatch backlog [20,000]")
    add("--claim-batch", type=int, default=BenchConfig.claim_batch, help="NORMAL lane [100]")
    add("--concurrency", type=int, default=100, help="NORMAL lane [100]")
    add("--trace", action="store_true", help="one more run per mode, timing each HIGH step")
    add("--repeat", type=int, default=3, help="runs of measurements 2 and 3; medians [3]")
    add("--out", type=Path, default=DEFAULT_OUT, help=f"[{DEFAULT_OUT}]")
    add("--no-write", action="store_true", help="print only")
    add("--database", default="tidings_bench_kafka", help="scratch database")
    add("--admin-url", default=BenchConfig().admin_url, help="PostgreSQL to create it through")
    return parser


def _info(started: float, load: str, pg: dict[str, str]) -> dict[str, str]:
    return {
        "Command": command_line(),
        "Date": report.now().strftime("%Y-%m-%d %H:%M UTC"),
        **report.machine(),
        "Database": (
            f"PostgreSQL {pg.get('server_version', '?')} on 127.0.0.1 (synchronous_commit="
            f"{pg.get('synchronous_commit', '?')}, fsync={pg.get('fsync', '?')}, "
            f"shared_buffers={pg.get('shared_buffers', '?')})"
        ),
        "Broker": f"tansu ({Path(broker_binary()).name}), `--storage-engine memory://tansu/`",
        "Run time": f"{time.perf_counter() - started:.0f} s",
        "Load average (1 min) at start / end": f"{load} / {os.getloadavg()[0]:.1f}",
    }


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if min(args.low, args.relay_deliveries, args.deliveries, args.repeat) < 1:
        raise SystemExit("sizes and --repeat must be at least 1")
    clock, load = time.perf_counter(), f"{os.getloadavg()[0]:.1f}"
    results = asyncio.run(measure(args))
    info = _info(clock, load, results.postgres)
    print(latency_table(results.modes, results.run.wait))
    print(relay_table(results.relay))
    print(scaling_table(results.scaling))
    if results.traced is not None:
        print(trace_tables(results.traced))
    if not args.no_write:
        text = args.out.read_text() if args.out.exists() else "# Benchmarks\n"
        body = section(results, info)
        args.out.write_text(sections.replace(text, SECTION, body))
        print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
