"""``python -m bench.rate``: one provider account offered three times its rate limit.

The simulator's SendGrid allows ``--limit`` requests per second (a bucket of one second's
worth; above it answers 429) and the SendGrid account is configured with the same rate.
For ``--seconds`` the bench offers ``3 x limit`` notifications per second through the API
(HIGH one per request, NORMAL and LOW in a batch every 0.1 s) while tidings' dispatcher
sends, all in this process on PostgreSQL. It prints the figures and writes them as the
``rate`` section of docs/benchmarks.md (the other sections are kept).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shlex
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import httpx

from bench import database, report, sections
from bench.config import BenchConfig
from bench.rate_scenario import (
    MIX,
    RateFigures,
    RateRun,
    percentile,
    rate_settings,
    run_rate,
    simulator,
)
from tidings.api.app import create_app
from tidings.dispatch.protection.ratelimit import RateLimitSettings
from tidings.priorities import Priority
from tidings.service import Service
from tidings.settings import Settings

DEFAULT_OUT = Path("docs/benchmarks.md")
SECTION = "rate"


@dataclass(frozen=True)
class Check:
    name: str
    passed: bool


def checks(f: RateFigures, burst_seconds: float) -> list[Check]:
    """What the issue asks of this run."""
    low_allowed = 0.6 * (f.limit * f.window_seconds + f.limit * burst_seconds)
    return [
        Check("no request over the provider's limit", f.over_limit == 0),
        Check("throughput >= 95% of the limit", f.ratio >= 0.95),
        Check("LOW <= 60% of the limit (+ its bucket)", f.by_priority[Priority.LOW] <= low_allowed),
        Check("HIGH never deferred for want of a token", f.high_deferred == 0),
    ]


# The baseline: HIGH alone at the same rate, nothing else offered.
HIGH_ONLY = {Priority.HIGH: MIX[Priority.HIGH], Priority.NORMAL: 0, Priority.LOW: 0}


async def measure(config: BenchConfig, run: RateRun) -> tuple[RateFigures, str]:
    await database.create(config)
    try:
        with tempfile.TemporaryDirectory(prefix="tidings-bench-rate-") as scratch:
            base = Settings(
                database_url=config.database_url,
                outbox_dir=Path(scratch) / "outbox",
                secret_key="bench-secret",
            )
            async with simulator(Path(scratch) / "credentials", run.limit) as sim:
                service = Service.from_settings(rate_settings(base, sim, run.limit))
                try:
                    transport = httpx.ASGITransport(app=create_app(service))
                    async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
                        figures = await run_rate(service, c, sim, run)
                finally:
                    await service.close()
        return figures, await _postgres(config)
    finally:
        await database.drop(config)


async def _postgres(config: BenchConfig) -> str:
    conn = await asyncpg.connect(config.admin_url)
    try:
        version = await conn.fetchval("SHOW server_version")
        commit = await conn.fetchval("SHOW synchronous_commit")
    finally:
        await conn.close()
    return f"PostgreSQL {version} on 127.0.0.1 (synchronous_commit={commit})"


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


def _high(f: RateFigures) -> str:
    return (
        f"{_ms(f.high_percentile(0.5))} / {_ms(f.high_percentile(0.99))} / "
        f"{_ms(max(f.high_latencies))} ({len(f.high_latencies)} HIGH)"
    )


def section(f: RateFigures, alone: RateFigures, results: list[Check], info: dict[str, str]) -> str:
    mix = ", ".join(f"{p.value.upper()} {n}/s" for p, n in MIX.items())
    sent = ", ".join(f"{p.value.upper()} {n}" for p, n in f.by_priority.items())
    rows = [
        ("Limit (account and simulated SendGrid)", f"{f.limit:g}/s"),
        ("Offered", f"{f.offered_per_second:.0f}/s ({mix})"),
        ("Sent, overall", f"{f.sent_per_second:.1f}/s ({f.ratio:.1%} of the limit)"),
        ("Sent, median of 1-s buckets", f"{f.median_bucket:g}/s"),
        ("Requests over the limit (simulator's count)", str(f.over_limit)),
        ("HIGH accepted -> sent, p50 / p99 / max", _high(f)),
        (
            f"The same, HIGH alone ({alone.window_seconds:.0f} s, nothing else offered)",
            _high(alone),
        ),
        ("HIGH deliveries ever deferred", str(f.high_deferred)),
        ("LOW share of the limit", f"{f.low_share:.1%} (cap 60%)"),
        ("Sent by priority in the window", sent),
        ("Claimed, then put back for want of a token", str(f.deferrals or 0)),
        ("PENDING at the end", str(f.backlog)),
        (
            "Event loop lag, p50 / p99",
            f"{_ms(percentile(f.loop_lags, 0.5))} / {_ms(percentile(f.loop_lags, 0.99))}",
        ),
    ]
    table = "\n".join(f"| {name} | {value} |" for name, value in rows)
    verdicts = "\n".join(f"| {c.name} | {'pass' if c.passed else 'FAIL'} |" for c in results)
    facts = "\n".join(f"- {name}: {value}" for name, value in info.items() if name != "Command")
    return f"""## Rate limit: three times an account's limit, mixed priorities

Written by `bench/rate.py`; run it again rather than editing. Command (from the
repository root):

```
{info["Command"]}
```

One SendGrid account limited to {f.limit:g} sends/s, sending to the simulator's SendGrid,
which allows the same rate (a bucket of one second's worth, 429 above it). For the run the
bench offers three times the limit through the API in this process (HIGH one
`POST /v1/notifications` each, NORMAL and LOW in one `POST /v1/notifications/batch` every
0.1 s) while tidings' dispatcher (default lanes and shares: LOW <= 60 %, NORMAL and LOW <=
90 %) sends. Figures come from what the simulator received, over the run minus its first
second (the buckets start full): {f.window_seconds:.0f} s; that window may also hold what
the buckets had saved at its start (at most one burst), hence "sent" slightly above the
limit while the simulator counts no request over it. HIGH latency is from the delivery's
`created_at` (accept) to its arrival at the simulator; the baseline is a second, shorter
run in which only the HIGH notifications are offered.

| figure | value |
|---|---|
{table}

| check | result |
|---|---|
{verdicts}

{facts}
- Caveat: API, dispatcher and simulator share one process and event loop (and the machine
  with PostgreSQL), so HIGH latency includes their CPU contention (see the loop lag).
"""


def command_line() -> str:
    python = Path(sys.executable)
    with contextlib.suppress(ValueError):
        python = python.relative_to(Path.cwd())
    return shlex.join([str(python), "-m", "bench.rate", *sys.argv[1:]])


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench.rate", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--seconds", type=float, default=30.0, help="length of the run [30]")
    parser.add_argument("--limit", type=float, default=50.0, help="sends per second [50]")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"[{DEFAULT_OUT}]")
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument(
        "--baseline-seconds", type=float, default=10.0, help="the HIGH-alone run [10]"
    )
    parser.add_argument("--database", default="tidings_bench_rate", help="scratch database")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    config = BenchConfig(database=args.database)
    started, clock = report.now(), time.perf_counter()
    load = f"{os.getloadavg()[0]:.1f}"
    figures, postgres = asyncio.run(measure(config, RateRun(args.limit, args.seconds)))
    alone, _ = asyncio.run(
        measure(config, RateRun(args.limit, args.baseline_seconds, mix=dict(HIGH_ONLY)))
    )
    results = checks(figures, RateLimitSettings().burst_seconds)
    info = {
        "Command": command_line(),
        "Date": started.strftime("%Y-%m-%d %H:%M UTC"),
        **report.machine(),
        "Database": postgres,
        "Run time": f"{time.perf_counter() - clock:.0f} s",
        "Load average (1 min) at start / end": f"{load} / {os.getloadavg()[0]:.1f}",
    }
    print("\n".join(figures.lines()))
    print(f"HIGH alone: {_high(alone)}")
    for check in results:
        print(f"{'pass' if check.passed else 'FAIL'}: {check.name}")
    if not args.no_write:
        text = args.out.read_text() if args.out.exists() else "# Benchmarks\n"
        args.out.write_text(sections.replace(text, SECTION, section(figures, alone, results, info)))
        print(f"written to {args.out}")
    return 0 if all(check.passed for check in results) else 1


if __name__ == "__main__":
    sys.exit(main())
