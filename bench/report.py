"""Medians, ratios and the table: printed, and written to docs/benchmarks.md."""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import tidings
from bench import sections
from bench.memory import TARGET_MB, Reading


@dataclass
class Measurement:
    """One row of the table: tidings and its raw baseline (and, for some, the baseline run by
    pgbench), one sample per repetition."""

    name: str
    workload: str
    baseline_how: str
    unit: str
    target: float | None  # the least acceptable tidings / baseline ratio; None: report only
    pgbench_how: str | None = None  # None: no pgbench side
    tidings: list[float] = field(default_factory=list)
    baseline: list[float] = field(default_factory=list)
    pgbench: list[float] = field(default_factory=list)

    @property
    def tidings_median(self) -> float:
        return statistics.median(self.tidings)

    @property
    def baseline_median(self) -> float:
        return statistics.median(self.baseline)

    @property
    def ratio(self) -> float:
        return self.tidings_median / self.baseline_median

    @property
    def pgbench_median(self) -> float | None:
        return statistics.median(self.pgbench) if self.pgbench else None

    @property
    def pgbench_ratio(self) -> float | None:
        theirs = self.pgbench_median
        return None if theirs is None else self.tidings_median / theirs

    @property
    def passed(self) -> bool | None:
        return None if self.target is None else self.ratio >= self.target

    @property
    def verdict(self) -> str:
        return {None: "report only", True: "pass", False: "FAIL"}[self.passed]

    @property
    def target_text(self) -> str:
        return "-" if self.target is None else f">= {self.target:.0%}"


@dataclass(frozen=True)
class RunInfo:
    command: str
    started: datetime
    seconds: float
    repeat: int
    postgres: dict[str, str]
    settings: dict[str, str]
    memory: Sequence[Reading] = ()


def _rate(value: float) -> str:
    return f"{value:,.0f}"


def _or_dash(value: float | None, form: str) -> str:
    return "-" if value is None else format(value, form)


def table(measurements: Sequence[Measurement]) -> str:
    """The results as a Markdown table (also readable as plain text); the ratio and target
    are tidings over the baseline, the pgbench columns the same baseline run by pgbench."""
    lines = [
        "| measurement | tidings | baseline | ratio | target | result | pgbench "
        "| tidings / pgbench |",
        "|---|---:|---:|---:|---:|---|---:|---:|",
    ]
    for m in measurements:
        lines.append(
            f"| {m.name} ({m.unit}) | {_rate(m.tidings_median)} | {_rate(m.baseline_median)} "
            f"| {m.ratio:.0%} | {m.target_text} | {m.verdict} "
            f"| {_or_dash(m.pgbench_median, ',.0f')} | {_or_dash(m.pgbench_ratio, '.0%')} |"
        )
    return "\n".join(lines)


def memory_table(readings: Sequence[Reading]) -> str:
    lines = [
        "| process | after | peak RSS (VmHWM) | target | result |",
        "|---|---|---:|---:|---|",
    ]
    for r in readings:
        lines.append(f"| {r.process} | {r.when} | {r.text} | {r.target} | {r.verdict} |")
    return "\n".join(lines)


def _samples(measurements: Sequence[Measurement]) -> str:
    lines = ["| measurement | tidings runs | baseline runs | pgbench runs |", "|---|---|---|---|"]
    for m in measurements:
        ours = ", ".join(_rate(v) for v in m.tidings)
        theirs = ", ".join(_rate(v) for v in m.baseline)
        server = ", ".join(_rate(v) for v in m.pgbench) or "-"
        lines.append(f"| {m.name} | {ours} | {theirs} | {server} |")
    return "\n".join(lines)


def _workloads(measurements: Sequence[Measurement]) -> str:
    def one(m: Measurement) -> str:
        text = f"- **{m.name}**: {m.workload}\n  Baseline: {m.baseline_how}"
        return text + (f"\n  pgbench: {m.pgbench_how}" if m.pgbench_how else "")

    return "\n".join(one(m) for m in measurements)


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _git_revision() -> str:
    def git(*args: str) -> str:
        result = subprocess.run(["git", *args], capture_output=True, text=True, check=False)
        return result.stdout.strip()

    revision = git("rev-parse", "--short", "HEAD") or "unknown"
    return f"{revision} (with uncommitted changes)" if git("status", "--porcelain") else revision


def machine() -> dict[str, str]:
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "CPUs (nproc)": f"{cpus} x {_cpu_model()}",
        "OS": f"{platform.system()} {platform.release()}",
        "Python": platform.python_version(),
        "tidings": f"{tidings.__version__}, commit {_git_revision()}",
    }


def _facts(info: RunInfo) -> str:
    pg = info.postgres
    postgres = (
        f"PostgreSQL {pg.get('server_version', '?')} on 127.0.0.1 (synchronous_commit="
        f"{pg.get('synchronous_commit', '?')}, fsync={pg.get('fsync', '?')}, shared_buffers="
        f"{pg.get('shared_buffers', '?')})"
    )
    facts = {
        "Date": info.started.strftime("%Y-%m-%d %H:%M UTC"),
        **machine(),
        "Database": postgres,
        "Run time": f"{info.seconds:.0f} s",
        "Repetitions": (
            f"{info.repeat} per row, tidings, baseline and pgbench alternating; medians"
        ),
        **info.settings,
    }
    return "\n".join(f"- {name}: {value}" for name, value in facts.items())


def document(measurements: Sequence[Measurement], info: RunInfo) -> str:
    return f"""# Benchmarks

Written by `bench/` (`make bench`); do not edit by hand, run the command again.

Each row compares tidings with a baseline measured in the same run against the same
PostgreSQL database. For the accept and no-op dispatch rows it is a raw baseline in the bench
process: the same rows inserted, claimed and marked sent with plain SQL through asyncpg, with
no HTTP and no tidings code (the Python-side limit). The accept rows have the same baseline
again run by `pgbench` (the server-side limit: no Python at all). The simulated-SendGrid row
compares tidings with itself on the no-op provider. Each figure is the median over the
repetitions; the ratio is tidings' median over the baseline's (the target applies to it),
"tidings / pgbench" over pgbench's. The tables are emptied before every run. Machines are
noisy: read the ratios, not the absolute figures.

Command (from the repository root):

```
{info.command}
```

{table(measurements)}

Peak resident memory per process (issue 14: under {TARGET_MB:.0f} MB at these loads):

{memory_table(info.memory)}

## Setup

{_facts(info)}

## What each row measures

{_workloads(measurements)}

## Caveats

- Everything shares one machine: the `tidings api` process, the bench process (HTTP
  clients, dispatcher, baselines) and PostgreSQL. During the single-request row the 32
  aiohttp clients spend about a quarter of a millisecond of CPU per request that the API
  process cannot use; the baseline has no such cost. Other work on the machine shows in the
  load average above.
- The dispatcher lane claims at most `concurrency - in flight` rows per claim. The bench's
  NORMAL lane has twice its claim batch in flight, so that it claims the next batch while
  the one before is sent, as a production lane sized for throughput would; with concurrency
  equal to the batch it waits for a whole batch's sends before each claim (about 0.1 lower
  in the no-op row: see the notes below). At tidings' defaults (concurrency 16,
  claim_batch 100) each claim would take 16 rows.
- pgbench runs in its own process (C, no Python), so its rate is what PostgreSQL itself
  allows on this machine for these rows; the asyncpg baseline adds the bench process's Python.
  pgbench's `-t` counts transactions per client, so the single row inserts a few more rows.
- The simulated SendGrid is one Python process (Hypercorn) on the same two CPUs: its CPU per
  request (about 0.65 ms) is taken from the dispatcher and PostgreSQL, which latency alone
  would not cost. The row at 0 ms next to it has the same HTTP costs and no latency: their
  ratio is what the latency costs once concurrency hides it.
- Memory: `tidings api` is read after all the accept rows; the dispatcher is read from a
  separate `tidings dispatch` subprocess run once per provider after the measured rounds (the
  measured rounds run the dispatcher in the bench process, whose peak also holds the HTTP
  clients, the baselines and every row's items). Each `tidings dispatch` line also says the
  rate that process reached on its own: near the in-process rate, the cost is in the
  process that sends, not in the bench around it.
- Absolute figures are for this machine only; compare ratios across runs.

## Every run

{_samples(measurements)}
"""


def write(path: Path, measurements: Sequence[Measurement], info: RunInfo) -> None:
    """The document, keeping the sections other benches wrote (``bench.sections``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    others = sections.kept(path.read_text()) if path.exists() else ""
    text = document(measurements, info)
    path.write_text(f"{text.rstrip()}\n\n{others}" if others else text)


def now() -> datetime:
    return datetime.now(UTC)
