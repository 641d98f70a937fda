"""The tables and the ``kafka`` section of docs/benchmarks.md (``python -m bench.kafka``)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from bench.kafka_latency import LatencyRun, ModeFigures
from bench.kafka_relay import RelayFigures
from bench.kafka_scaling import PROCESSES, ScalingFigures
from tidings.dispatch.protection.ratelimit import DEFAULT_SHARES
from tidings.priorities import Priority
from tidings.transport.settings import KafkaSettings

LOW_SHARE = DEFAULT_SHARES[Priority.LOW]


@dataclass
class Results:
    run: LatencyRun
    modes: dict[str, ModeFigures]  # "direct", "kafka"
    relay: RelayFigures
    scaling: ScalingFigures
    postgres: dict[str, str]
    traced: dict[str, ModeFigures] | None = None  # --trace: one more run per mode


def ms(seconds: float) -> str:
    """Milliseconds; a HIGH never received (an infinite latency) as "not received"."""
    return "not received" if math.isinf(seconds) else f"{seconds * 1000:,.0f} ms"


def _ratio(kafka: float, direct: float) -> str:
    if math.isinf(kafka) or math.isinf(direct) or direct == 0:
        return "-"
    return f"{kafka / direct:.2f}x"


def _missing(f: ModeFigures) -> str:
    statuses = ", ".join(f"{n} {status}" for status, n in sorted(f.missing.items()))
    return f"{len(f.latencies)} / {f.unsent}" + (f" ({statuses})" if statuses else "")


def latency_table(modes: dict[str, ModeFigures], wait: float) -> str:
    d, k = modes["direct"], modes["kafka"]
    quantiles = [
        (f"HIGH 202 -> received, {name}", ms(d.p(q)), ms(k.p(q)), _ratio(k.p(q), d.p(q)))
        for name, q in (("median", 0.5), ("p99", 0.99))
    ]
    rows = [
        *quantiles,
        ("HIGH 202 -> received, max of those received", ms(max(d.latencies, default=0)),
         ms(max(k.latencies, default=0)), "-"),
        (f"HIGH received / not received {wait:g} s after the last POST", _missing(d),
         _missing(k), "-"),
        ("LOW received during the HIGH window", f"{d.low_rate:,.0f}/s", f"{k.low_rate:,.0f}/s",
         _ratio(k.low_rate, d.low_rate)),
        ("LOW backlog accepted (batch API, before the senders start)",
         f"{d.accept_seconds:.1f} s", f"{k.accept_seconds:.1f} s", "-"),
        ("LOW deliveries QUEUED (published, not yet taken) when HIGH started",
         f"{d.low_queued_at_start:,}", f"{k.low_queued_at_start:,}", "-"),
        ("Simulator's 429 answers", f"{d.over_limit}", f"{k.over_limit}", "-"),
    ]  # fmt: skip
    lines = ["| figure | direct | kafka | kafka / direct |", "|---|---:|---:|---:|"]
    lines += [f"| {a} | {b} | {c} | {r} |" for a, b, c, r in rows]
    return "\n".join(lines)


def relay_table(r: RelayFigures) -> str:
    return "\n".join(
        [
            "| measurement | tidings relay | raw claim | ratio |",
            "|---|---:|---:|---:|",
            f"| PENDING -> QUEUED, {r.deliveries:,} deliveries, batches of {r.batch} "
            f"(deliveries/s) | {r.rate(r.relay):,.0f} | {r.rate(r.raw):,.0f} | {r.ratio:.0%} |",
        ]
    )


def scaling_table(s: ScalingFigures) -> str:
    lines = [
        "| `tidings dispatch` processes | deliveries SENT/s | vs 1 process | every run |",
        "|---:|---:|---:|---|",
    ]
    for count in PROCESSES:
        runs = ", ".join(f"{s.deliveries / t:,.0f}" for t in s.seconds[count])
        lines.append(f"| {count} | {s.rate(count):,.0f} | {s.scaling(count):.2f}x | {runs} |")
    return "\n".join(lines)


def _relay_runs(r: RelayFigures) -> str:
    relay = ", ".join(f"{r.deliveries / t:,.0f}" for t in r.relay)
    raw = ", ".join(f"{r.deliveries / t:,.0f}" for t in r.raw)
    return f"Every run (deliveries/s): relay {relay}; raw claim {raw}."


def section(r: Results, info: dict[str, str]) -> str:
    facts = "\n".join(f"- {name}: {value}" for name, value in info.items() if name != "Command")
    return f"""## Kafka transport: HIGH latency during a drain, relay rate, dispatch scaling

Written by `bench/kafka.py`; run it again rather than editing. Command (from the
repository root):

```
{info["Command"]}
```

{_latency_text(r.run, r.modes)}

{_trace_text(r.traced)}

{_relay_text(r.relay)}

{_scaling_text(r.scaling)}

{facts}

{CAVEATS}
"""


def trace_tables(traced: dict[str, ModeFigures]) -> str:
    tables = []
    for mode, figures in traced.items():
        lines = [f"| {mode}: step of a HIGH email | median | HIGH timed |", "|---|---:|---:|"]
        lines += [f"| {what} | {_step(s)} | {n} |" for what, s, n in figures.steps]
        total = f"{ms(figures.p(0.5))} (p99 {ms(figures.p(0.99))})"
        lines.append(f"| whole: 202 -> received, this run | {total} | {len(figures.latencies)} |")
        if mode == "kafka":
            early, lost = figures.early
            lines.append(
                "| tickets the worker fetched before the relay's commit had returned / of "
                f"them dropped by its claim (row left QUEUED) | {early} / {lost} | "
                f"{figures.offered} |"
            )
        tables.append("\n".join(lines))
    return "\n\n".join(tables)


def _step(seconds: float) -> str:
    return "-" if math.isnan(seconds) else f"{seconds * 1000:,.1f} ms"


def _trace_text(traced: dict[str, ModeFigures] | None) -> str:
    if traced is None:
        return "Where HIGH's time goes: not traced in this run (`--trace`)."
    return f"""Where HIGH's time goes: one more run of each mode (not among the figures above),
its senders started through `bench/kafka_trace.py`, which notes the time before and after
the relay's claim and publish, the worker's fetch and claim, the direct lane's claim and
the SendGrid call of each HIGH delivery (it changes nothing else). Each row is the median
over the HIGH emails of that step alone, so the rows need not add up to the whole's
median; a negative step began before the bench had its 202 (the NOTIFY fires at commit).

{trace_tables(traced)}"""


def _latency_text(run: LatencyRun, modes: dict[str, ModeFigures]) -> str:
    count = round(run.high_rate * run.high_seconds)
    kafka = KafkaSettings()
    return f"""**1. HIGH latency during a LOW drain, kafka against direct.** Each mode from emptied
tables, fresh processes and a reset simulator (`tidings simulate` in a process of its own,
its SendGrid limited to {run.rate:g}/s, dedup off). A `tidings api` accepts {run.low:,} LOW
marketing emails (batches of 1,000 through `POST /v1/notifications/batch`, two in flight)
before the senders start. Then direct: one `tidings dispatch`; kafka: one `tidings relay`
and one `tidings worker` on a fresh tansu broker (`[kafka]` at its defaults:
{kafka.partitions} partitions per topic, relay_batch {kafka.relay_batch}, max_queued
{kafka.max_queued:,}, linger {kafka.linger_ms} ms, fetch wait {kafka.fetch_wait_ms} ms, commits
every {kafka.commit_interval:g} s). Every email goes through one SendGrid account limited to
{run.rate:g}/s (LOW may use {LOW_SHARE:.0%} of it); lanes and everything else at tidings'
defaults; no Redis (one sending process). After {run.warmup:g} s of drain (from the first LOW
the simulator received), {count} HIGH transactional emails are POSTed one per request at
{run.high_rate:g}/s for {run.high_seconds:g} s. A HIGH's latency runs from the 202 as the bench
got it to the simulator's receipt of its request (both `time.time()` on this machine); one
not received {run.wait:g} s after the last POST counts as later than any other in the
quantiles ("not received"). The backlog is far from drained when the run ends: every figure
is taken while LOW drains. Ratio: kafka / direct.

{latency_table(modes, run.wait)}{_left_queued(modes["kafka"])}"""


def _left_queued(kafka: ModeFigures) -> str:
    if not kafka.missing.get("QUEUED"):
        return ""
    lease = KafkaSettings().queue_lease_seconds
    return f"""

The kafka HIGH left QUEUED were published and committed QUEUED, but no worker claimed them
within the wait; such a row goes out only once its queue lease
(`kafka.queue_lease_seconds`, {lease:g} s) has run out and the reaper has given it back to
the relay. A traced run (`--trace`) counts the tickets a worker fetched before the relay's
commit had returned, and those its claim dropped."""


def _relay_text(r: RelayFigures) -> str:
    return f"""**2. Relay throughput against the raw claim.** {r.deliveries:,} due NORMAL email
deliveries pre-inserted in plain SQL before every run (tables emptied, then `ANALYZE` and
`CHECKPOINT`). tidings: `Relay(service).run()` in the bench process (asyncio) against a
fresh tansu broker, no worker consuming, `kafka.max_queued` 10,000,000, `kafka.relay_batch`
{r.batch}; its producer started and the topics made before the clock starts; timed until
no delivery is PENDING, that is every batch published, acknowledged (`acks=all`) and
committed QUEUED. Raw claim, in the same run: plain asyncpg on one connection, per
transaction the relay's own two statements (`SELECT ... FOR UPDATE OF d SKIP LOCKED LIMIT
{r.batch}`, then `UPDATE delivery SET status = 'QUEUED' ... WHERE id = ANY(...)`) with
nothing published, until the claim finds nothing. {len(r.relay)} run(s) per side,
alternating; medians; ratio: relay / raw.

{relay_table(r)}

{_relay_runs(r)}"""


def _scaling_text(s: ScalingFigures) -> str:
    return f"""**3. Direct-mode dispatch throughput with 1, 2 and 4 processes.** Per run, from
emptied tables: that many `tidings dispatch` processes start (PostgreSQL, no Redis: there is
no rate to share; every channel through the built-in `noop` chain; the NORMAL lane at
claim_batch {s.claim_batch} and concurrency {s.concurrency}, everything else at its default)
and are waited for until each has reported itself, plus 2 s. Then one transaction inserts
{s.deliveries:,} due NORMAL email deliveries (plain SQL) and wakes the NORMAL lanes
(`pg_notify`, as the intake does); timed from its commit until no delivery is PENDING or
SENDING. Rounds of 1, 2 and 4 processes, {len(s.seconds[1])} round(s); medians; "vs 1
process" is the rate over the median rate of one process. The machine has 2 CPUs, shared by
every dispatcher and PostgreSQL.

{scaling_table(s)}"""


CAVEATS = """Caveats:

- One machine with 2 CPUs for everything: PostgreSQL, the tidings processes, tansu, the
  simulator and the bench process (HTTP client, the in-process relay, the raw baseline). In
  measurement 1 kafka mode runs one more Python process (a relay and a worker, against one
  dispatcher) and the broker on the same two cores; deployed apart, they would not take CPU
  from PostgreSQL, the API and each other.
- tansu with its in-memory storage engine: nothing of the log reaches a disk and `acks=all`
  on one broker waits for no replica. A real Kafka cluster (replication, network hops) adds
  to the publish time; read the relay's rate as an upper bound. tansu also does not hand a
  new record at once to a fetch already waiting on its partition (the answer comes later
  the longer the fetch may wait), so the "broker -> worker" step depends on
  `kafka.fetch_wait_ms` here, where Kafka answers such a fetch when the record arrives.
- Measurement 1 is one run per mode: its p99 rests on the latest few HIGH of each. The
  modes drain LOW at different rates (the row "LOW received during the HIGH window"), so
  HIGH competes with a different LOW load in each: the ratio compares the modes as they
  run, not at equal LOW throughput.
- Measurement 3 sends through the no-op provider: its cost is tidings' and PostgreSQL's
  CPU, which more processes cannot add on two cores. With a real provider a send waits on
  the network, and more processes help more.
- Absolute figures are for this machine only; compare ratios, and runs with each other."""
