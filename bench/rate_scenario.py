"""The rate scenario of bench/rate.py, also run (shorter) by tests/integration/test_protection.py.

One SendGrid account with a rate limit ``R``, the simulator's SendGrid limited to the same
``R``, and a producer offering ``3 R`` per second of HIGH, NORMAL and LOW email through the
API while the real dispatcher sends. What the simulator received, with each delivery's
acceptance time, is what the figures are computed from.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa
from pydantic import SecretStr

from tidings.assembly import assemble_dispatcher
from tidings.dispatch.protection.ratelimit import DEFAULT_SHARES
from tidings.priorities import Priority
from tidings.providers.sendgrid import SendGridAccount
from tidings.service import Service, providers_from_settings
from tidings.settings import Settings
from tidings.simulator.behaviour import Behaviour
from tidings.simulator.server import Simulator, SimulatorConfig
from tidings.store.schema import delivery, delivery_event

SENDGRID_KEY = "SG.protection-test-key"
ACCOUNT = "sendgrid-main"
TYPES = {
    Priority.HIGH: ("otp.email", "transactional"),
    Priority.NORMAL: ("order.shipped", "transactional"),
    Priority.LOW: ("promo.weekly", "marketing"),
}
# Offered per second: 150, three times a limit of 50/s. HIGH and NORMAL together offer 40 %
# of the limit, so that LOW (offering far more than its 60 % share) is held to its share and
# the account is still saturated.
MIX = {Priority.HIGH: 5, Priority.NORMAL: 15, Priority.LOW: 130}
TICK_SECONDS = 0.1


def simulator(credentials_dir: Path, rate: float | None = None) -> Simulator:
    """The simulator; SendGrid with a bucket of ``rate``/s (burst: one second's worth)."""
    behaviours = {} if rate is None else {"sendgrid": Behaviour(rate_limit=rate)}
    config = SimulatorConfig(
        credentials_dir=credentials_dir, sendgrid_api_key=SENDGRID_KEY, behaviours=behaviours
    )
    return Simulator(config)


def sendgrid_account(sim: Simulator, rate: float | None = None) -> SendGridAccount:
    return SendGridAccount(
        api_key=SecretStr(SENDGRID_KEY),
        base_url=sim.url,
        from_email="noreply@tidings.example.com",
        rate_per_second=rate,
        timeout=5,
    )


def rate_settings(base: Settings, sim: Simulator, rate: float) -> Settings:
    """``base`` with email through one SendGrid account limited to ``rate``."""
    return base.model_copy(
        update={
            "accounts": {ACCOUNT: sendgrid_account(sim, rate)},
            "providers": {**base.providers, "email": [ACCOUNT]},
        }
    )


async def register_types(client: httpx.AsyncClient) -> None:
    text = {"subject": "Hello", "text": "data: {{ data | tojson }}"}
    for priority, (name, category) in TYPES.items():
        body = {"category": category, "priority": priority.value, "channels": ["email"]}
        response = await client.put(f"/v1/types/{name}", json=body)
        assert response.status_code in (200, 201), response.text
        response = await client.put(f"/v1/templates/{name}/email/en", json=text)
        assert response.status_code in (200, 201), response.text


def _item(priority: Priority, serial: int) -> dict[str, Any]:
    name, _category = TYPES[priority]
    return {
        "idempotencyKey": f"{priority.value}-{serial}",
        "type": name,
        # The priority is in the address, so the simulator's records say it.
        "to": {"email": f"{priority.value}-{serial}@example.com"},
    }


def _per_tick(per_second: int, tick: int) -> int:
    """Spread ``per_second`` evenly over the ticks of a second."""
    ticks = round(1 / TICK_SECONDS)
    step = tick % ticks
    return (step + 1) * per_second // ticks - step * per_second // ticks


async def offer(client: httpx.AsyncClient, seconds: float, mix: dict[Priority, int] = MIX) -> int:
    """Every tick: the HIGH ones one POST each (as OTPs come), the rest in one batch.
    Returns how many notifications were accepted."""
    started = time.monotonic()
    serial = accepted = 0
    for tick in range(round(seconds / TICK_SECONDS)):
        await asyncio.sleep(max(0.0, started + tick * TICK_SECONDS - time.monotonic()))
        for _ in range(_per_tick(mix[Priority.HIGH], tick)):
            serial += 1
            item = _item(Priority.HIGH, serial)
            key = item.pop("idempotencyKey")
            response = await client.post(
                "/v1/notifications", json=item, headers={"Idempotency-Key": key}
            )
            assert response.status_code == 202, response.text
            accepted += 1
        batch = []
        for priority in (Priority.NORMAL, Priority.LOW):
            for _ in range(_per_tick(mix[priority], tick)):
                serial += 1
                batch.append(_item(priority, serial))
        if not batch:
            continue
        response = await client.post("/v1/notifications/batch", json={"notifications": batch})
        assert response.status_code == 200, response.text
        assert all(r["status"] == "accepted" for r in response.json()["results"])
        accepted += len(batch)
    return accepted


@dataclass
class RateFigures:
    """What the simulator saw over the steady window, and HIGH's latency."""

    limit: float
    offered_per_second: float
    window_seconds: float
    sent: int
    by_priority: dict[Priority, int]
    per_second_buckets: list[int]
    over_limit: int
    high_latencies: list[float]
    high_deferred: int
    deferrals: dict[str, int] = field(default_factory=dict)
    loop_lags: list[float] = field(default_factory=list)
    backlog: dict[str, int] = field(default_factory=dict)

    @property
    def sent_per_second(self) -> float:
        return self.sent / self.window_seconds

    @property
    def ratio(self) -> float:
        return self.sent_per_second / self.limit

    @property
    def low_share(self) -> float:
        return self.by_priority[Priority.LOW] / (self.limit * self.window_seconds)

    @property
    def median_bucket(self) -> float:
        return statistics.median(self.per_second_buckets)

    def high_percentile(self, q: float) -> float:
        return percentile(self.high_latencies, q)

    def lines(self) -> list[str]:
        return [
            f"limit {self.limit:g}/s, offered {self.offered_per_second:.0f}/s",
            f"sent {self.sent_per_second:.1f}/s over {self.window_seconds:.0f} s "
            f"({self.ratio:.1%} of the limit); median 1-s bucket {self.median_bucket:g}",
            "sent by priority: " + ", ".join(f"{p.value} {n}" for p, n in self.by_priority.items()),
            f"LOW share {self.low_share:.1%} of the limit (cap {DEFAULT_SHARES[Priority.LOW]:.0%})",
            f"over-limit requests at the simulator: {self.over_limit}",
            f"HIGH accepted->sent: p50 {self.high_percentile(0.5) * 1000:.0f} ms, "
            f"p99 {self.high_percentile(0.99) * 1000:.0f} ms, "
            f"max {max(self.high_latencies) * 1000:.0f} ms "
            f"({len(self.high_latencies)} HIGH; {self.high_deferred} ever deferred)",
            f"deferred for want of a token (claimed, put back): {self.deferrals}",
            f"backlog at the end: {self.backlog}",
            f"event loop lag: p50 {percentile(self.loop_lags, 0.5) * 1000:.0f} ms, "
            f"p99 {percentile(self.loop_lags, 0.99) * 1000:.0f} ms",
        ]


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


@dataclass
class RateRun:
    limit: float
    seconds: float
    warmup: float = 1.0  # the first second (the buckets start full) is not measured
    mix: dict[Priority, int] = field(default_factory=lambda: dict(MIX))


async def run_rate(
    service: Service, client: httpx.AsyncClient, sim: Simulator, run: RateRun
) -> RateFigures:
    """Offer ``3 R``/s for ``run.seconds`` while a dispatcher sends; then measure."""
    await register_types(client)
    dispatcher = assemble_dispatcher(service, providers_from_settings(service.settings))
    stop = asyncio.Event()
    task = asyncio.create_task(dispatcher.run(stop))
    lags: list[float] = []
    probe = asyncio.create_task(_loop_lag(lags, stop))
    try:
        started = time.time()
        accepted = await offer(client, run.seconds, run.mix)
        ended = time.time()
    finally:
        stop.set()
        await asyncio.wait_for(asyncio.gather(task, probe), timeout=30)
        await dispatcher.protection.providers.close()
    result = await figures(service, sim, run, accepted, started + run.warmup, ended)
    result.loop_lags = lags
    return result


async def _loop_lag(lags: list[float], stop: asyncio.Event, every: float = 0.01) -> None:
    """How late the event loop (API, dispatcher and simulator share it) runs a timer."""
    while not stop.is_set():
        before = time.monotonic()
        await asyncio.sleep(every)
        lags.append(time.monotonic() - before - every)


async def figures(
    service: Service, sim: Simulator, run: RateRun, accepted: int, start: float, end: float
) -> RateFigures:
    state = sim.state("sendgrid")
    received = [r for r in state.received if not r.duplicate]
    window = [r for r in received if start <= r.at < end]
    by_priority = dict.fromkeys(Priority, 0)
    for record in window:
        by_priority[Priority(record.address.split("-", 1)[0])] += 1
    buckets = [0] * max(1, int(end - start))
    for record in window:
        index = int(record.at - start)
        if index < len(buckets):
            buckets[index] += 1
    sent_at = {r.idempotency_key: r.at for r in received}
    stored = await _stored(service)
    high = stored.high_created
    latencies = [
        sent_at[key] - created.timestamp()
        for key, created in high.items()
        # The last HIGH may still be in flight when the run stops.
        if key in sent_at or created.timestamp() < end - 1.0
    ]
    missing = [key for key, c in high.items() if key not in sent_at and c.timestamp() < end - 1.0]
    assert not missing, f"HIGH deliveries accepted but never sent: {missing[:5]}"
    return RateFigures(
        limit=run.limit,
        offered_per_second=accepted / (end - start + run.warmup),
        window_seconds=end - start,
        sent=len(window),
        by_priority=by_priority,
        per_second_buckets=buckets,
        over_limit=int(state.summary()["overLimit"]),
        high_latencies=latencies,
        high_deferred=stored.high_deferred,
        deferrals=stored.deferrals,
        backlog=stored.backlog,
    )


@dataclass
class _Stored:
    high_created: dict[str, Any]  # HIGH delivery id -> accepted at
    high_deferred: int  # HIGH deliveries ever deferred
    deferrals: dict[str, int]  # deferred events per priority (claimed, then put back)
    backlog: dict[str, int]  # still PENDING per priority


async def _stored(service: Service) -> _Stored:
    """What the database says about the run."""
    high = delivery.c.priority == Priority.HIGH.value
    deferred = delivery_event.c.kind == "deferred"
    joined = delivery_event.join(delivery, delivery.c.id == delivery_event.c.delivery_id)
    async with service.db.engine.connect() as conn:
        rows = await conn.execute(sa.select(delivery.c.id, delivery.c.created_at).where(high))
        high_deferred = await conn.scalar(
            sa.select(sa.func.count(sa.distinct(delivery_event.c.delivery_id)))
            .select_from(joined)
            .where(high, deferred)
        )
        deferrals = await conn.execute(
            sa.select(delivery.c.priority, sa.func.count())
            .select_from(joined)
            .where(deferred)
            .group_by(delivery.c.priority)
        )
        pending = await conn.execute(
            sa.select(delivery.c.priority, sa.func.count())
            .where(delivery.c.status == "PENDING")
            .group_by(delivery.c.priority)
        )
        return _Stored(
            {str(row.id): row.created_at for row in rows},
            int(high_deferred or 0),
            {priority: count for priority, count in deferrals},
            {priority: count for priority, count in pending},
        )
