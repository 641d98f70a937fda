"""A fleet of real ``tidings`` processes under faults, and what is checked at the end.

Everything the fleet depends on is the harness's own, so that a fault hurts no other test:
a Redis (``redis-server`` on a free port, no persistence: a restart is empty), a tansu broker
(memory storage: a restart is empty), and PostgreSQL behind a TCP forwarder
(tests/tcp_proxy.py) that an outage cuts (every connection dropped, new ones refused): the
machine's PostgreSQL is shared with other tests and cannot be stopped. The provider is the
simulator's SendGrid with a rate limit (a 429 above it) and no dedup, so every repeat shows
in its per-delivery counts (``custom_args.delivery_id``).

At the end (every fault healed, every process running): every accepted delivery is terminal
(none PENDING, QUEUED or SENDING), every one is SENT or FAILED ``ambiguous`` (at most once,
documented), the provider received each SENT one, a delivery received twice is one whose
answer was unknown (a lease expired during its send, or a retry marked ``perhapsSent``: the
documented at-least-once case), and the simulator never answered 429."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import subprocess
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import sqlalchemy as sa

from tests.kafka_broker import Broker
from tests.processes import (
    TidingsProcess,
    TidingsProcesses,
    free_port,
    tidings_env,
    wait_listening,
    wait_ready,
)
from tests.system.schedules import DIRECT_ROLES, KAFKA_ROLES, Fault, Kind, names
from tests.tcp_proxy import TcpProxy
from tidings.simulator.server import Simulator

log = logging.getLogger("tests.system")

KEY = "SG.faults"
ACCOUNT = "sendgrid-main"
# type -> (category, priority): every lane has work.
TYPES = {
    "otp": ("transactional", "high"),
    "news": ("transactional", "normal"),
    "promo": ("marketing", "low"),
}
IN_PROGRESS = ("PENDING", "QUEUED", "SENDING")
# A worker that takes longer than this to stop on SIGTERM is noted (the trial saw 12 s+).
SLOW_STOP_SECONDS = 12.0
ANSWER_WITHIN = 180.0  # seconds a batch may go unanswered (outages last at most 20 s)


@dataclass
class OwnRedis:
    log_path: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> OwnRedis:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed (scripts/services.sh installs it)")
        args = [binary, "--port", str(self.port), "--save", "", "--appendonly", "no"]
        with self.log_path.open("ab") as out:
            self.process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
        wait_listening(self.port, self.process, 15, self.log_path)
        return self

    def stop(self) -> None:
        """SIGKILL: everything it held is gone."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        self.process = None


@dataclass
class Report:
    """What a schedule left; ``problems`` lists what breaks a promise."""

    schedule: list[Fault]
    accepted: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    stuck: Counter[str] = field(default_factory=Counter)  # "low QUEUED" -> count
    failed: Counter[str] = field(default_factory=Counter)  # failure kind -> count
    received: int = 0  # messages the provider accepted
    missing: int = 0  # SENT rows the provider never received
    repeats: int = 0  # deliveries the provider received more than once
    explained: int = 0  # of those, sends whose answer was unknown (documented)
    unexplained: list[str] = field(default_factory=list)
    over_limit: int = 0
    notes: list[str] = field(default_factory=list)

    def problems(self) -> list[str]:
        found = []
        if self.stuck:
            found.append(f"stuck (not terminal): {dict(self.stuck)}")
        lost = {kind: n for kind, n in self.failed.items() if kind != "ambiguous"}
        if lost:
            found.append(f"FAILED other than ambiguous: {lost}")
        if self.missing:
            found.append(f"{self.missing} SENT deliveries the provider never received")
        if self.unexplained:
            found.append(f"sent twice without an unknown answer: {self.unexplained[:5]}")
        if self.over_limit:
            found.append(f"the provider answered 429 {self.over_limit} times")
        return found

    def summary(self) -> str:
        lines = [f"  {fault.describe()}" for fault in self.schedule]
        lines.append(
            f"  accepted {self.accepted} deliveries: {dict(self.statuses)}; provider received "
            f"{self.received}; repeats {self.repeats} ({self.explained} documented); "
            f"429s {self.over_limit}"
        )
        lines += [f"  note: {note}" for note in self.notes]
        lines += [f"  PROBLEM: {problem}" for problem in self.problems()]
        return "\n".join(lines)


@dataclass
class FaultFleet:
    """``mode``: "kafka" (api, relays, workers) or "direct" (api, serve, dispatch)."""

    mode: str
    database_url: str  # PostgreSQL itself; the processes reach it through the proxy
    workdir: Path
    sim: Simulator
    rate: float
    roles: dict[str, int] = field(default_factory=dict)
    processes: dict[str, TidingsProcess] = field(default_factory=dict)
    accepted: set[str] = field(default_factory=set)  # delivery ids
    notes: list[str] = field(default_factory=list)
    _healing: list[asyncio.Task[None]] = field(default_factory=list)
    _down: set[str] = field(default_factory=set)  # what a fault took away, until healed

    def __post_init__(self) -> None:
        self.roles = self.roles or (KAFKA_ROLES if self.mode == "kafka" else DIRECT_ROLES)
        target = sa.make_url(self.database_url)
        self.proxy = TcpProxy(target_port=target.port or 5432)
        self.redis = OwnRedis(self.workdir / "redis.log")
        self.broker = Broker(self.workdir / "tansu.log") if self.mode == "kafka" else None
        self.api_port = free_port()
        self.serve_port = free_port()
        self.api_url = f"http://127.0.0.1:{self.api_port}"
        proxied = target.set(host="127.0.0.1", port=self.proxy.port)
        self.runner = TidingsProcesses(self._env(proxied.render_as_string(False)), self.workdir)

    def _env(self, database_url: str) -> dict[str, str]:
        account = {
            "kind": "sendgrid",
            "api_key": KEY,
            "base_url": self.sim.url,
            "from_email": "noreply@example.com",
            "rate_per_second": self.rate,
            # A loaded runner must not turn a slow answer into an unknown one (a repeat).
            "timeout": 30,
        }
        settings: dict[str, Any] = {
            "database_url": database_url,
            "redis_url": self.redis.url,
            "accounts": {ACCOUNT: account},
            "providers": {"email": ACCOUNT},
            "rate_limits": {"burst_seconds": 0.5},
            # Short leases: what a killed process held comes back within the run.
            "lease_seconds": 5,
            "reaper_interval": 1,
            "secret_key": "faults-test",
        }
        if self.broker is not None:
            settings["transport"] = "kafka"
            settings["kafka_bootstrap"] = self.broker.bootstrap
            settings["kafka"] = {"partitions": 4, "queue_lease_seconds": 10, "max_queued": 1_500}
        return tidings_env(**settings)

    async def __aenter__(self) -> FaultFleet:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.proxy.start()
        self.redis.start()
        if self.broker is not None:
            self.broker.start()
        for name in names(self.roles):
            self._start(name)
        await wait_ready(self.api_url, self.processes["api-0"], timeout=120)
        async with httpx.AsyncClient(base_url=self.api_url, timeout=30) as client:
            for name, (category, priority) in TYPES.items():
                await _put_type(client, name, category, priority)
        return self

    async def __aexit__(self, *_exc: object) -> None:
        for task in self._healing:
            task.cancel()
        await asyncio.gather(*self._healing, return_exceptions=True)
        self.runner.stop_all()
        self.proxy.close()
        self.redis.stop()
        if self.broker is not None:
            self.broker.stop()

    def _start(self, name: str) -> None:
        role = name.rsplit("-", 1)[0]
        args = [role]
        if role in ("api", "serve"):  # the load goes to the API alone; serve's API idles
            port = self.api_port if role == "api" else self.serve_port
            args += ["--host", "127.0.0.1", "--port", str(port)]
        self.processes[name] = self.runner.start(name, args)

    # --- faults ---------------------------------------------------------------------------

    async def apply(self, fault: Fault) -> None:
        """Make ``fault`` happen; one whose target is still down from an earlier fault is
        skipped (noted), so that nothing is started twice."""
        target = fault.target or fault.kind.value
        if target in self._down:
            self.notes.append(f"skipped ({target} still down): {fault.describe()}")
            return
        log.info("fault: %s", fault.describe())
        if fault.kind is Kind.KILL:
            await self.processes[fault.target].kill_and_wait()
            self._later(target, fault.seconds, lambda: self._start(fault.target))
        elif fault.kind is Kind.RESTART:
            await self._restart_role(fault.target)
        elif fault.kind is Kind.BROKER:
            assert self.broker is not None, "no broker in direct mode"
            self.broker.stop()
            self._later(target, fault.seconds, self.broker.start)
        elif fault.kind is Kind.REDIS:
            self.redis.stop()
            self._later(target, fault.seconds, self.redis.start)
        elif fault.kind is Kind.POSTGRES:
            self.proxy.cut()
            self._later(target, fault.seconds, self.proxy.restore)

    def _later(self, target: str, seconds: float, heal: Any) -> None:
        self._down.add(target)

        async def after() -> None:
            await asyncio.sleep(seconds)
            await asyncio.to_thread(heal)
            self._down.discard(target)

        self._healing.append(asyncio.create_task(after()))

    async def _restart_role(self, role: str) -> None:
        """A deploy: SIGTERM each, wait for it to finish its work, start it again."""
        targets = [name for name in self.processes if name.rsplit("-", 1)[0] == role]
        for name in targets:
            if name in self._down:
                continue  # killed: its supervisor starts it
            process = self.processes[name]
            started = time.monotonic()
            try:
                await process.stop_and_wait(timeout=30)
            except TimeoutError:
                self.notes.append(f"{name} ignored SIGTERM for 30 s: killed")
                await process.kill_and_wait()
            took = time.monotonic() - started
            if took > SLOW_STOP_SECONDS:
                self.notes.append(f"{name} took {took:.1f}s to stop on SIGTERM")
            self._start(name)

    async def sending(self, within: float, first: int = 50) -> None:
        """Wait until the provider has received ``first`` messages."""
        state = self.sim.state("sendgrid")
        deadline = time.monotonic() + within
        while len(state.received) < first:
            if time.monotonic() > deadline:
                raise AssertionError(f"nothing sent within {within}s\n{self.logs()}")
            await asyncio.sleep(0.1)

    async def healed(self) -> None:
        """Every fault undone: the fleet whole again."""
        await asyncio.gather(*self._healing)
        self._healing.clear()
        for name, process in self.processes.items():
            if not process.is_running():
                self.notes.append(f"{name} had exited ({process.returncode}): started again")
                self._start(name)

    # --- load -----------------------------------------------------------------------------

    async def submit(self, counts: dict[str, int], over: float, batch: int = 100) -> None:
        """``counts`` notifications per type, in batches spread over ``over`` seconds; a
        batch that fails (the API killed, the database away) is sent again with the same
        idempotency keys until it is answered."""
        items = [(kind, n) for kind, count in counts.items() for n in range(count)]
        items.sort(key=lambda item: item[1])  # priorities interleaved, as they would arrive
        batches = [items[start : start + batch] for start in range(0, len(items), batch)]
        pause = over / max(1, len(batches))
        async with httpx.AsyncClient(base_url=self.api_url, timeout=30) as client:
            for chunk in batches:
                body = {
                    "notifications": [
                        {
                            "idempotencyKey": f"{kind}-{n}",
                            "type": kind,
                            "to": {"email": f"{kind}-{n}@example.com"},
                        }
                        for kind, n in chunk
                    ]
                }
                await self._post_until_answered(client, body)
                await asyncio.sleep(pause)

    async def _post_until_answered(self, client: httpx.AsyncClient, body: dict[str, Any]) -> None:
        # Longer than any outage of a schedule: an API that never answers again (it exits at
        # start) fails the run with its logs instead of holding it for good.
        deadline = time.monotonic() + ANSWER_WITHIN
        while True:
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"the API answered nothing for {ANSWER_WITHIN}s\n{self.logs()}"
                )
            try:
                answer = await client.post("/v1/notifications/batch", json=body)
            except httpx.TransportError:
                await asyncio.sleep(0.5)
                continue
            if answer.status_code == 200:
                break
            if answer.status_code < 500 and answer.status_code != 429:
                raise AssertionError(f"batch refused: {answer.status_code} {answer.text[:300]}")
            await asyncio.sleep(0.5)
        for result in answer.json()["results"]:
            if result["status"] == "error":
                raise AssertionError(f"item refused: {result}")
            self.accepted.update(d["id"] for d in result["deliveries"])

    # --- the end --------------------------------------------------------------------------

    async def settle(self, within: float) -> None:
        """Wait until no delivery is in progress, or ``within`` seconds."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            rows = await self._fetch(
                "SELECT count(*) AS n FROM delivery WHERE status = ANY($1::text[])",
                list(IN_PROGRESS),
            )
            if rows[0]["n"] == 0:
                return
            await asyncio.sleep(1.0)

    async def report(self, schedule: list[Fault]) -> Report:
        report = Report(schedule, accepted=len(self.accepted), notes=list(self.notes))
        rows = await self._fetch(
            "SELECT id::text AS id, status, priority, failure_kind FROM delivery"
        )
        unknown = await self._unknown_answers()
        state = self.sim.state("sendgrid")
        per_delivery = Counter(r.idempotency_key for r in state.received if r.idempotency_key)
        report.received = len(state.received)
        report.over_limit = state.counts["over_limit"]
        for row in rows:
            report.statuses[row["status"]] += 1
            if row["status"] in IN_PROGRESS:
                report.stuck[f"{row['priority']} {row['status']}"] += 1
            if row["status"] == "FAILED":
                report.failed[row["failure_kind"] or "?"] += 1
            if row["status"] == "SENT" and not per_delivery[row["id"]]:
                report.missing += 1
        never_stored = self.accepted - {row["id"] for row in rows}
        if never_stored:
            report.stuck["never stored"] = len(never_stored)
        for delivery_id, times in per_delivery.items():
            if times > 1:
                report.repeats += 1
                if delivery_id in unknown:
                    report.explained += 1
                else:
                    report.unexplained.append(delivery_id)
        return report

    async def _unknown_answers(self) -> set[str]:
        """Deliveries a send of which had an unknown answer: a lease that expired during
        it, or a failure marked ``perhapsSent``."""
        rows = await self._fetch(
            "SELECT DISTINCT delivery_id::text AS id FROM delivery_event "
            "WHERE kind = 'lease_expired' OR (detail ->> 'perhapsSent') = 'true'"
        )
        return {row["id"] for row in rows}

    async def _fetch(self, query: str, *args: Any) -> list[Any]:
        url = sa.make_url(self.database_url).set(drivername="postgresql")
        conn = await asyncpg.connect(url.render_as_string(False))
        try:
            return list(await conn.fetch(query, *args))
        finally:
            await conn.close()

    def logs(self, lines: int = 15) -> str:
        return "\n".join(
            f"--- {process.name} ({process.log_path.name})\n{process.log_tail(lines)}"
            for process in self.runner.started
        )


async def _put_type(client: httpx.AsyncClient, name: str, category: str, priority: str) -> None:
    body = {"category": category, "priority": priority, "channels": ["email"]}
    answer = await client.put(f"/v1/types/{name}", json=body)
    assert answer.status_code in (200, 201), answer.text
    template = {"subject": "Hello", "text": "data: {{ data | tojson }}"}
    answer = await client.put(f"/v1/templates/{name}/email/en", json=template)
    assert answer.status_code in (200, 201), answer.text


async def run_schedule(
    fleet: FaultFleet,
    schedule: list[Fault],
    counts: dict[str, int],
    submit_over: float,
    settle_within: float,
) -> Report:
    """Submit the load while the faults happen, heal everything, wait for the drain, and
    report what the fleet left."""
    load = asyncio.create_task(fleet.submit(counts, submit_over))
    try:
        await fleet.sending(within=180)  # faults hit a fleet at work, not one still booting
        started = time.monotonic()
        for fault in sorted(schedule):
            await asyncio.sleep(max(0.0, started + fault.at - time.monotonic()))
            await fleet.apply(fault)
        await load
    finally:
        if not load.done():
            load.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await load
    await fleet.healed()
    await fleet.settle(settle_within)
    return await fleet.report(schedule)


def unique_name(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:10]}"
