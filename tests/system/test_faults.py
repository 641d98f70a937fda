"""The fleet under a schedule of faults (tests/system/fleet.py): CI runs the outside trial's
sequence, compressed (relay and worker SIGKILLs, the broker and Redis restarted empty, a
PostgreSQL outage, the relays and workers restarted, a second outage); ``make faults`` runs
it at full length and ten random schedules (``python -m tests.system.run``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.system.fleet import KEY, FaultFleet, run_schedule
from tests.system.schedules import (
    DIRECT_ROLES,
    KAFKA_ROLES,
    Kind,
    names,
    random_schedule,
    trial_schedule,
)
from tidings.simulator.behaviour import Behaviour
from tidings.simulator.server import Simulator, SimulatorConfig

RATE = 200.0
COUNTS = {"otp": 300, "news": 900, "promo": 1_800}


@pytest.fixture
async def sim(tmp_path: Path) -> AsyncIterator[Simulator]:
    behaviour = {"sendgrid": Behaviour(rate_limit=RATE, dedup=False, latency_ms=2)}
    config = SimulatorConfig(credentials_dir=tmp_path, sendgrid_api_key=KEY, behaviours=behaviour)
    async with Simulator(config) as simulator:
        yield simulator


@pytest.mark.slow
@pytest.mark.timeout(600)
async def test_the_trials_sequence_loses_nothing_and_repeats_only_the_unknown(
    pg_database_url: str, tmp_path: Path, sim: Simulator
) -> None:
    schedule = trial_schedule(scale=0.5, outage=5.0)
    async with FaultFleet("kafka", pg_database_url, tmp_path / "fleet", sim, RATE) as fleet:
        report = await run_schedule(fleet, schedule, COUNTS, submit_over=12, settle_within=150)
        print(f"the trial's sequence, compressed:\n{report.summary()}")
        assert not report.problems(), f"{report.summary()}\n{fleet.logs()}"
    assert report.accepted == sum(COUNTS.values())


def test_a_seed_draws_one_schedule_that_kills_every_process() -> None:
    first = random_schedule(7, 60, KAFKA_ROLES, kafka=True)
    assert first == random_schedule(7, 60, KAFKA_ROLES, kafka=True)
    assert first != random_schedule(8, 60, KAFKA_ROLES, kafka=True)
    killed = {fault.target for fault in first if fault.kind is Kind.KILL}
    assert killed == set(names(KAFKA_ROLES))
    assert {Kind.BROKER, Kind.REDIS, Kind.POSTGRES} <= {fault.kind for fault in first}
    assert all(0 < fault.at <= 60 for fault in first)
    direct = random_schedule(7, 60, DIRECT_ROLES, kafka=False, faults=30)
    assert {"api-0", "serve-0", "dispatch-0"} <= {fault.target for fault in direct}
    assert Kind.BROKER not in {fault.kind for fault in direct}


def test_the_trials_sequence_has_its_faults_in_order() -> None:
    kinds = [fault.kind for fault in sorted(trial_schedule())]
    assert kinds == [
        Kind.KILL,
        Kind.KILL,
        Kind.BROKER,
        Kind.REDIS,
        Kind.POSTGRES,
        Kind.RESTART,
        Kind.RESTART,
        Kind.POSTGRES,
    ]
