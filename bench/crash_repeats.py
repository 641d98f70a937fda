"""``python -m bench.crash_repeats``: sends repeated per SIGKILL of ``tidings serve``.

A send repeated after a crash is one the provider accepted while the process that made it
died before its outcome was written: the reaper hands the delivery out again once its lease
expires. Each row drains ``--deliveries`` due deliveries through the simulator (a ``tidings
simulate`` subprocess counting each delivery's sends) with ``tidings serve`` at its default
lane concurrency, SIGKILLed ``--kills`` times in the middle of its sends and started again,
then counts the sends beyond the first of each delivery, per kill:

- email through SendGrid (``on_ambiguous = retry``, at least once), the outcome writer
  batching every 10 ms (``outcome_flush_interval = 0.01``, the writer before the group
  commit) and at its default (0: a group commit, written as soon as one is queued);
- SMS through Twilio with ``on_ambiguous = retry`` (sent again after a crash, as before
  the start marks) and ``fail`` (its default: a send in flight at a kill ends FAILED
  ambiguous, never repeated; those are counted too).

Writes the section ``crash-repeats`` (``--section``) of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import random
import shlex
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from bench import database, sections
from bench.config import BenchConfig
from bench.kafka_procs import Procs, procs, tidings_env
from bench.report import machine, now
from tidings.simulator.server import SimulatorConfig
from tidings.store.engine import connect

SENDGRID_KEY = "SG.bench-crash"
SIM = SimulatorConfig()
KILL_DELAY = (0.1, 0.6)  # seconds after a restarted process's first send
UNFINISHED = ["PENDING", "QUEUED", "SENDING"]
TYPES = {
    "email": {"category": "transactional", "priority": "normal", "channels": ["email"]},
    "sms": {"category": "transactional", "priority": "normal", "channels": ["sms"]},
}
TEMPLATE = {"subject": "Code", "text": "Your code is {{ data.code }}"}


@dataclass(frozen=True)
class Row:
    name: str
    channel: str
    settings: dict[str, Any]  # TIDINGS_* beyond the accounts
    on_ambiguous: str = "retry"


ROWS = {
    "email-batched": Row(
        "email (SendGrid), outcomes batched every 10 ms", "email", {"outcome_flush_interval": 0.01}
    ),
    "email-group": Row("email (SendGrid), outcomes as a group commit (default)", "email", {}),
    "sms-retry": Row("SMS (Twilio), on_ambiguous = retry", "sms", {}, "retry"),
    "sms-fail": Row("SMS (Twilio), on_ambiguous = fail (default)", "sms", {}, "fail"),
}


@dataclass
class Result:
    row: Row
    kills: int
    sends: int
    distinct: int
    ambiguous: int
    seconds: float

    @property
    def repeats(self) -> int:
        return self.sends - self.distinct


def _simulator_toml(latency_ms: float) -> str:
    behaviour = f"latency_ms = {latency_ms}\nlatency_jitter_ms = {latency_ms}\n"
    return (
        f'sendgrid_api_key = "{SENDGRID_KEY}"\ntidings_url = ""\n\n'
        f"[behaviours.sendgrid]\n{behaviour}\n[behaviours.twilio]\n{behaviour}"
    )


async def _simulator(running: Procs, latency_ms: float) -> str:
    config = running.scratch / "simulator.toml"
    config.write_text(_simulator_toml(latency_ms))
    port = _port()
    args = ["simulate", "--config", str(config), "--http-port", str(port)]
    args += ["--smtp-port", str(_port()), "--credentials-dir", str(running.scratch / "creds")]
    running.tidings("simulator", args, tidings_env())
    url = f"http://127.0.0.1:{port}"
    await _until_ok(f"{url}/_sim/counts", running, 30)
    return url


def _port() -> int:
    from bench.api_server import free_port

    return free_port()


async def _until_ok(url: str, running: Procs, within: float) -> None:
    deadline = time.monotonic() + within
    async with httpx.AsyncClient(timeout=2.0) as client:
        while time.monotonic() < deadline:
            running.check()
            try:
                if (await client.get(url)).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.05)
    raise TimeoutError(f"{url} did not answer within {within} s")


def _env(config: BenchConfig, row: Row, sim: str, api: str) -> dict[str, str]:
    accounts = {
        "sendgrid-sim": {
            "kind": "sendgrid",
            "api_key": SENDGRID_KEY,
            "base_url": sim,
            "from_email": "noreply@tidings.example.com",
            "timeout": 10,
        },
        "twilio-sim": {
            "kind": "twilio",
            "account_sid": SIM.twilio_account_sid,
            "auth_token": SIM.twilio_auth_token,
            "from_number": "+15005550006",
            "base_url": sim,
            "timeout": 10,
            "on_ambiguous": row.on_ambiguous,
        },
    }
    return tidings_env(
        database_url=config.database_url,
        accounts=accounts,
        providers={"email": ["sendgrid-sim"], "sms": ["twilio-sim"]},
        public_url=api,  # Twilio's status callback names the delivery: the simulator counts it
        lease_seconds=2,
        reaper_interval=0.5,
        **row.settings,
    )


async def _measure_row(
    config: BenchConfig, row: Row, args: argparse.Namespace, rng: random.Random
) -> Result:
    with tempfile.TemporaryDirectory(prefix="tidings-crash-") as scratch, procs(Path(scratch)) as p:
        sim = await _simulator(p, args.latency_ms)
        port = _port()
        api = f"http://127.0.0.1:{port}"
        env = _env(config, row, sim, api)
        pool = await asyncpg.create_pool(config.database_url, min_size=1, max_size=2)
        try:
            await database.reset(pool)
            serve = ["serve", "--host", "127.0.0.1", "--port", str(port)]
            process = p.tidings("serve", serve, env)
            await _until_ok(f"{api}/readyz", p, 60)
            started = time.perf_counter()
            await _accept(api, row.channel, args.deliveries)
            provider = "sendgrid" if row.channel == "email" else "twilio"
            for _ in range(args.kills):
                before = await _sends(sim, provider)
                while await _sends(sim, provider) == before:
                    p.check()
                    await asyncio.sleep(0.02)
                await asyncio.sleep(rng.uniform(*KILL_DELAY))
                process.kill()
                process.wait(10)
                p.started = [s for s in p.started if s[1] is not process]
                process = p.tidings("serve", serve, env)
                await _until_ok(f"{api}/readyz", p, 60)
            await _until_settled(pool, p)
            seconds = time.perf_counter() - started
            keys = Counter(m["idempotency_key"] for m in await _messages(sim, provider))
            async with pool.acquire() as conn:
                ambiguous = await conn.fetchval(
                    "SELECT count(*) FROM delivery WHERE failure_kind = 'ambiguous'"
                )
        finally:
            await pool.close()
    return Result(row, args.kills, sum(keys.values()), len(keys), ambiguous, seconds)


async def _accept(api: str, channel: str, count: int) -> None:
    to = "email" if channel == "email" else "phone"
    async with httpx.AsyncClient(base_url=api, timeout=60) as client:
        for start in range(0, count, 1000):
            items = [
                {
                    "idempotencyKey": f"crash-{n}",
                    "type": f"bench.crash.{channel}",
                    "to": {to: f"u{n}@example.com" if to == "email" else f"+1555{n:07d}"},
                    "data": {"code": n},
                }
                for n in range(start, min(count, start + 1000))
            ]
            answer = await client.post("/v1/notifications/batch", json={"notifications": items})
            answer.raise_for_status()


async def _sends(sim: str, provider: str) -> int:
    async with httpx.AsyncClient(timeout=10) as client:
        counts = (await client.get(f"{sim}/_sim/counts")).json()
    return int(counts.get(provider, {}).get("received", 0))


async def _messages(sim: str, provider: str) -> list[dict[str, Any]]:
    async with httpx.AsyncClient(timeout=60) as client:
        answer = await client.get(f"{sim}/_sim/{provider}/messages")
    found: list[dict[str, Any]] = answer.json()
    return found


async def _until_settled(pool: asyncpg.Pool, running: Procs) -> None:
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        running.check()
        async with pool.acquire() as conn:
            left = await conn.fetchval(
                "SELECT count(*) FROM delivery WHERE status = ANY($1::text[])", UNFINISHED
            )
        if left == 0:
            return
        await asyncio.sleep(0.2)
    raise TimeoutError("deliveries still in progress after 300 s")


async def run(config: BenchConfig, args: argparse.Namespace) -> list[Result]:
    await database.create(config)
    try:
        db = connect(config.database_url)
        try:
            for channel, body in TYPES.items():
                await database.register_type(db, f"bench.crash.{channel}", body, TEMPLATE)
        finally:
            await db.dispose()
        rng = random.Random(args.seed)
        results = []
        for name in args.rows:
            result = await _measure_row(config, ROWS[name], args, rng)
            print(_line(result), file=sys.stderr, flush=True)
            results.append(result)
        return results
    finally:
        await database.drop(config)


def _line(r: Result) -> str:
    return (
        f"{r.row.name}: {r.repeats} repeats in {r.kills} kills ({r.repeats / r.kills:.1f}/kill), "
        f"{r.ambiguous} ambiguous, {r.sends} sends of {r.distinct} deliveries, {r.seconds:.0f} s"
    )


def section(results: Sequence[Result], args: argparse.Namespace, command: str) -> str:
    facts = machine()
    lines = [
        f"## Sends repeated per SIGKILL ({args.label})",
        "",
        "Written by `bench/crash_repeats.py`. Each row: "
        f"{args.deliveries:,} due deliveries drained by one `tidings serve` at the default lane "
        f"concurrency (NORMAL: 16), SIGKILLed {args.kills} times, each "
        f"{KILL_DELAY[0]:g} to {KILL_DELAY[1]:g} s after its first send, and started again; "
        "the simulator (a `tidings simulate` subprocess) answering each request after "
        f"{args.latency_ms:g} to {2 * args.latency_ms:g} ms and counting each delivery's "
        "sends. A repeat is a send beyond a delivery's first.",
        "",
        "```",
        command,
        "```",
        "",
        "| row | kills | repeats | repeats per kill | FAILED ambiguous | sends | deliveries |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| {r.row.name} | {r.kills} | {r.repeats} | {r.repeats / r.kills:.1f} | "
            f"{r.ambiguous} | {r.sends:,} | {r.distinct:,} |"
        )
    lines += [
        "",
        f"{now():%Y-%m-%d %H:%M} UTC; CPUs: {facts['CPUs (nproc)']}; tidings "
        f"{facts['tidings']}; seed {args.seed}.",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.crash_repeats", description=__doc__)
    parser.add_argument("--deliveries", type=int, default=3000, metavar="N")
    parser.add_argument("--kills", type=int, default=10, metavar="N")
    parser.add_argument("--latency-ms", type=float, default=20.0, metavar="MS")
    parser.add_argument("--rows", nargs="+", choices=list(ROWS), default=list(ROWS))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--label", default="after")
    parser.add_argument("--section", default="crash-repeats")
    parser.add_argument("--out", type=Path, default=Path("docs/benchmarks.md"))
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    if args.kills < 1 or args.deliveries < 1:
        raise SystemExit("--kills and --deliveries must be at least 1")
    config = dataclasses.replace(BenchConfig(), database="tidings_bench_crash")
    results = asyncio.run(run(config, args))
    command = shlex.join(["python", "-m", "bench.crash_repeats", *sys.argv[1:]])
    body = section(results, args, command)
    print(body)
    if not args.no_write:
        text = args.out.read_text() if args.out.exists() else "# Benchmarks\n"
        args.out.write_text(sections.replace(text, args.section, body))
        print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
