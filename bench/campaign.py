"""``python -m bench.campaign``: campaign expansion rate against a raw baseline, and HIGH
latency while a campaign drains.

1. A topic with ``--subscribers`` followers (profiles with an email, made in SQL) on a
   scratch PostgreSQL database: tidings' ``Expander.step()`` in this process (claim to
   SENDING, pages of ``--page-size``) against plain asyncpg inserting the same rows with
   the same page size; ``--repeat`` times each, alternating, tables emptied in between.
2. ``tidings serve`` sending every email through one no-op account limited to
   ``--drain-rate``/s: HIGH notifications POSTed at ``--high-rate``/s for
   ``--high-seconds``, first alone, then while a LOW campaign of ``--drain-users`` drains.

Prints the figures and writes them as the ``campaign`` section of docs/benchmarks.md (the
other sections are kept).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shlex
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg

from bench import campaign_data, campaign_profile, database, report, sections
from bench.campaign_drain import DrainRun, HighFigures
from bench.campaign_drain import measure as measure_drain
from bench.campaign_expansion import Phases, expand_raw, expand_tidings
from bench.config import BenchConfig
from tidings.service import Service
from tidings.settings import Settings

DEFAULT_OUT = Path("docs/benchmarks.md")
SECTION = "campaign"
TARGET = 0.5  # tidings' expansion rate at least half the raw one


@dataclass
class Expansion:
    users: int
    page_size: int
    window: float
    tidings: list[float] = field(default_factory=list)  # seconds per run
    raw: list[float] = field(default_factory=list)
    phases: list[Phases] = field(default_factory=list)

    def rate(self, seconds: list[float]) -> float:
        return self.users / statistics.median(seconds)

    @property
    def ratio(self) -> float:
        return statistics.median(self.raw) / statistics.median(self.tidings)

    def where(self) -> list[tuple[str, float, float]]:
        """(part, seconds, share) over the tidings runs, largest first (the median run's)."""
        index = self.tidings.index(sorted(self.tidings)[(len(self.tidings) - 1) // 2])
        total = self.tidings[index]
        parts = self.phases[index].breakdown(total)
        return sorted(((n, s, s / total) for n, s in parts), key=lambda p: -p[1])


@dataclass
class Results:
    expansion: Expansion
    alone: HighFigures | None
    during: HighFigures | None
    run: DrainRun
    postgres: dict[str, str]
    profile: campaign_profile.Profile | None = None


async def measure(args: argparse.Namespace) -> Results:
    config = BenchConfig(database=args.database, admin_url=args.admin_url)
    url = config.database_url
    await database.create(config)
    try:
        await campaign_data.register(url)
        settings = Settings(
            database_url=url, secret_key="bench-secret", campaigns={"page_size": args.page_size}
        )
        service = Service.from_settings(settings)
        pool: asyncpg.Pool = await asyncpg.create_pool(url, min_size=1, max_size=4)
        try:
            async with pool.acquire() as conn:
                topics = {campaign_data.TOPIC: args.subscribers}
                if not args.no_drain:
                    topics[campaign_data.DRAIN_TOPIC] = args.drain_users
                await campaign_data.audience(conn, max(topics.values()), topics)
            expansion = await _expansion(service, pool, args)
            profile = await _profile(service, pool) if args.py_spy else None
            run = DrainRun(args.drain_users, args.drain_rate, args.high_rate, args.high_seconds)
            alone = during = None
            if not args.no_drain:
                with tempfile.TemporaryDirectory(prefix="tidings-bench-campaign-") as scratch:
                    alone = await measure_drain(url, pool, Path(scratch), run, False)
                    print(f"HIGH alone: {_high(alone)}", flush=True)
                    during = await measure_drain(url, pool, Path(scratch), run, True)
                    print(f"HIGH during the drain: {_high(during)}", flush=True)
            facts = await database.facts(pool)
            return Results(expansion, alone, during, run, facts, profile)
        finally:
            await pool.close()
            await service.close()
    finally:
        await database.drop(config)


async def _expansion(service: Service, pool: asyncpg.Pool, args: argparse.Namespace) -> Expansion:
    window = service.settings.campaigns.due_spread_seconds
    result = Expansion(args.subscribers, args.page_size, window)
    for attempt in range(args.repeat):
        async with pool.acquire() as conn:
            await campaign_data.reset(conn)
        phases = Phases()
        result.tidings.append(await expand_tidings(service, pool, f"tidings-{attempt}", phases))
        result.phases.append(phases)
        async with pool.acquire() as conn:
            await campaign_data.reset(conn)
        result.raw.append(await expand_raw(service, pool, f"raw-{attempt}", args.page_size, window))
        print(
            f"expansion {attempt + 1}/{args.repeat}: tidings {result.tidings[-1]:.1f} s, "
            f"raw {result.raw[-1]:.1f} s",
            flush=True,
        )
    return result


async def _profile(service: Service, pool: asyncpg.Pool) -> campaign_profile.Profile:
    """One more tidings expansion (not among the timed ones) under py-spy."""
    async with pool.acquire() as conn:
        await campaign_data.reset(conn)
    with tempfile.TemporaryDirectory(prefix="tidings-bench-profile-") as scratch:
        out = Path(scratch) / "expansion.raw"
        with campaign_profile.recording(out):
            seconds = await expand_tidings(service, pool, "profiled")
        profile = campaign_profile.parse(out)
    print(f"profiled expansion: {seconds:.1f} s, {profile.samples} samples", flush=True)
    return profile


def _profile_lines(profile: campaign_profile.Profile) -> str:
    own = "\n".join(f"{i}. `{n}`: {share:.0%}" for i, (n, share) in enumerate(profile.top(), 1))
    within = ", ".join(f"`{n}` {share:.0%}" for n, share in profile.tidings())
    return f"""py-spy (one more expansion, {profile.samples:,} samples of its CPU; waits for
PostgreSQL are not sampled). The five innermost functions with the most samples:

{own}

Inclusive, tidings' functions: {within}.
"""


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:,.0f} ms"


def _high(f: HighFigures) -> str:
    return (
        f"{_ms(f.p(0.5))} / {_ms(f.p(0.99))} / {_ms(max(f.latencies))} "
        f"({len(f.latencies)} HIGH{f', {f.unsent} never sent' if f.unsent else ''})"
    )


def _expansion_table(e: Expansion) -> str:
    verdict = "pass" if e.ratio >= TARGET else "FAIL"
    users = (e.rate(e.tidings), e.rate(e.raw))
    rows = [
        f"| Expansion, {e.users:,} users (users/s) | {users[0]:,.0f} | {users[1]:,.0f} "
        f"| {e.ratio:.0%} | >= {TARGET:.0%} | {verdict} |",
        # One email delivery per user: deliveries/s equal users/s.
        f"| Expansion, {e.users:,} users (deliveries/s) | {users[0]:,.0f} | {users[1]:,.0f} "
        f"| {e.ratio:.0%} | >= {TARGET:.0%} | {verdict} |",
    ]
    return "\n".join(
        [
            "| measurement | tidings | raw baseline | ratio | target | result |",
            "|---|---:|---:|---:|---:|---|",
            *rows,
        ]
    )


def _where(e: Expansion, top: int = 5) -> str:
    lines = [
        f"{i}. {name}: {seconds:.1f} s ({share:.0%})"
        for i, (name, seconds, share) in enumerate(e.where()[:top], start=1)
    ]
    return "\n".join(lines)


def _drain_table(alone: HighFigures, during: HighFigures, run: DrainRun) -> str:
    def ratio(q: float) -> str:
        return f"{during.p(q) / alone.p(q):.1f}x"

    rows = [
        ("HIGH accepted -> sent, p50", _ms(alone.p(0.5)), _ms(during.p(0.5)), ratio(0.5)),
        ("HIGH accepted -> sent, p99", _ms(alone.p(0.99)), _ms(during.p(0.99)), ratio(0.99)),
        ("HIGH accepted -> sent, max", _ms(max(alone.latencies)), _ms(max(during.latencies)), "-"),
        ("HIGH sent / never sent", f"{len(alone.latencies)} / {alone.unsent}",
         f"{len(during.latencies)} / {during.unsent}", "-"),
        ("LOW (campaign) sent during the HIGH window", "-",
         f"{during.low_sent_in_window:,} ({during.low_rate:,.0f}/s; LOW cap "
         f"{0.6 * run.rate:,.0f}/s)", "-"),
        ("Campaign deliveries / still PENDING after the HIGH run", "-",
         f"{during.campaign_deliveries:,} / {during.low_pending_after:,}", "-"),
        ("Campaign POST -> expanded (SENDING), in `tidings serve`", "-",
         f"{during.expansion_seconds or 0:.1f} s", "-"),
    ]  # fmt: skip
    lines = ["| figure | HIGH alone | during the campaign | ratio |", "|---|---:|---:|---:|"]
    lines += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows]
    return "\n".join(lines)


def section(r: Results, info: dict[str, str]) -> str:
    e = r.expansion
    runs = ", ".join(f"{e.users / s:,.0f}" for s in e.tidings)
    raw_runs = ", ".join(f"{e.users / s:,.0f}" for s in e.raw)
    facts = "\n".join(f"- {name}: {value}" for name, value in info.items() if name != "Command")
    drain = "(not run: `--no-drain`)"
    if r.alone is not None and r.during is not None:
        drain = _drain_table(r.alone, r.during, r.run)
    return f"""## Campaigns: expansion rate, and HIGH latency during a campaign drain

Written by `bench/campaign.py`; run it again rather than editing. Command (from the
repository root):

```
{info["Command"]}
```

**Expansion.** A topic followed by {e.users:,} users, each with a profile holding an email
address (made with `generate_series`, then vacuumed), on a scratch database migrated with
tidings' migrations. tidings: a campaign of a LOW marketing email type to the topic, stored
through `tidings.campaigns.create`, then `Expander.step()` in the bench process (a `Service`
from `Settings`, `campaigns.page_size` {e.page_size:,}), timed from the claim until the
campaign is SENDING. Raw baseline, in the same run: plain asyncpg on one connection makes
the same rows (same columns, value shapes and `tidings.ids.new_id` ids, send times spread
over the same {e.window:.0f} s window): a claim and a count, then per page one read of the
ids with their addresses (`topic_subscription` joined to `user_profile`) and one
transaction of one `INSERT ... SELECT FROM unnest` per table plus the cursor's update; no
preference or suppression reads. One email delivery per user, so deliveries/s equal
users/s. Tables emptied (and a checkpoint) before every run; {len(e.tidings)} run(s) per
side, alternating; medians.

{_expansion_table(e)}

Every run (users/s): tidings {runs}; raw {raw_runs}.

Where tidings' expansion time goes (wall clock of the median run, timers around tidings'
calls; the five largest parts; when the expander stores page n while it reads and builds
page n + 1, those parts overlap and can add up to more than the total):

{_where(e)}

{_profile_lines(r.profile) if r.profile else "(no py-spy profile in this run: `--py-spy`)"}

**HIGH latency during a campaign drain.** `tidings serve` (API and dispatcher in one
process, default lanes and shares) with every email sent through one `noop` account limited
to {r.run.rate:g} sends/s (`rate_per_second`; LOW may use 60 % of it).
HIGH: {r.run.high_rate:g} `POST /v1/notifications`/s for {r.run.high_seconds:g} s
(transactional email, one request each, from the bench process); latency from the 202 as the
client got it to the delivery's `sent_at`. Twice in this invocation, each from emptied
tables and a fresh process: HIGH alone, then HIGH while a LOW campaign of
{r.run.users:,} users (one email each, all due at once: `campaigns.due_spread_seconds = 0`) is
sent; the HIGH run starts once the campaign is expanded. Ratio: during / alone.

{drain}

{facts}
- Caveat: one machine for everything (PostgreSQL, `tidings serve`, the bench process with
  its HTTP client and the raw baseline); read ratios, not absolute figures.
"""


def command_line() -> str:
    python = Path(sys.executable)
    with contextlib.suppress(ValueError):
        python = python.relative_to(Path.cwd())
    return shlex.join([str(python), "-m", "bench.campaign", *sys.argv[1:]])


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench.campaign", description=__doc__.split("\n")[0]
    )
    add = parser.add_argument
    add("--subscribers", type=int, default=1_000_000, help="the topic's followers [1,000,000]")
    add("--repeat", type=int, default=1, help="expansion runs per side; medians [1]")
    add("--page-size", type=int, default=10_000, help="users per page, both sides [10,000]")
    add("--drain-users", type=int, default=100_000, help="the drained campaign [100,000]")
    add("--drain-rate", type=float, default=200.0, help="the account's sends/s [200]")
    add("--high-rate", type=float, default=20.0, help="HIGH notifications per second [20]")
    add("--high-seconds", type=float, default=20.0, help="how long HIGH is offered [20]")
    add("--no-drain", action="store_true", help="the expansion only")
    add("--py-spy", action="store_true", help="profile one more expansion with py-spy")
    add("--out", type=Path, default=DEFAULT_OUT, help=f"[{DEFAULT_OUT}]")
    add("--no-write", action="store_true", help="print only")
    add("--database", default="tidings_bench_campaign", help="scratch database")
    add("--admin-url", default=BenchConfig().admin_url, help="PostgreSQL to create it through")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if min(args.subscribers, args.repeat, args.drain_users) < 1:
        raise SystemExit("sizes and --repeat must be at least 1")
    if not 1 <= args.page_size <= 10_000:
        raise SystemExit("--page-size must be between 1 and 10,000 (tidings' limit)")
    started, clock = report.now(), time.perf_counter()
    load = f"{os.getloadavg()[0]:.1f}"
    results = asyncio.run(measure(args))
    pg = results.postgres
    info = {
        "Command": command_line(),
        "Date": started.strftime("%Y-%m-%d %H:%M UTC"),
        **report.machine(),
        "Database": (
            f"PostgreSQL {pg.get('server_version', '?')} on 127.0.0.1 (synchronous_commit="
            f"{pg.get('synchronous_commit', '?')}, shared_buffers={pg.get('shared_buffers', '?')})"
        ),
        "Run time": f"{time.perf_counter() - clock:.0f} s",
        "Load average (1 min) at start / end": f"{load} / {os.getloadavg()[0]:.1f}",
    }
    e = results.expansion
    print(_expansion_table(e))
    print("where tidings' expansion time goes:\n" + _where(e, top=len(e.where())))
    if results.profile is not None:
        print(_profile_lines(results.profile))
    if results.alone is not None and results.during is not None:
        print(_drain_table(results.alone, results.during, results.run))
    if not args.no_write:
        text = args.out.read_text() if args.out.exists() else "# Benchmarks\n"
        args.out.write_text(sections.replace(text, SECTION, section(results, info)))
        print(f"written to {args.out}")
    return 0 if e.ratio >= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
