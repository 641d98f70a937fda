"""Breakers shared through the database, without Redis: three dispatchers on one PostgreSQL
database against a dead SendGrid (the simulator down) spend about one breaker's threshold
of attempts before all of them hold, not three thresholds; and a peer's own opening holds
every dispatcher, while an opening that was only followed is not passed on."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from pydantic import SecretStr

from tests.helpers import post, put_type
from tidings.assembly import assemble_dispatcher
from tidings.clock import utcnow
from tidings.dispatch.dispatcher import Dispatcher
from tidings.dispatch.pipeline.retry import RetrySettings
from tidings.dispatch.protection.breaker import (
    BreakerSettings,
    BreakerStatus,
    CircuitBreaker,
)
from tidings.dispatch.protection.breaker_share import BreakerShare
from tidings.dispatch.protection.ratelimit import RateLimitSettings
from tidings.providers.sendgrid import SendGridAccount
from tidings.service import Service, providers_from_settings
from tidings.settings import Settings
from tidings.simulator.behaviour import Behaviour
from tidings.simulator.server import Simulator, SimulatorConfig
from tidings.store import provider_state

ACCOUNT = "sendgrid-main"
KEY = "SG.breaker-share"
THRESHOLD = 5
# The fleet's rate: each of the three takes a third, one attempt a second; alone, each
# would spend its own THRESHOLD (15 in all) over about five seconds.
RATE = 3.0


@pytest.fixture
async def dead_sendgrid(tmp_path: Path) -> AsyncIterator[Simulator]:
    behaviours = {"sendgrid": Behaviour(down=True)}
    config = SimulatorConfig(credentials_dir=tmp_path, sendgrid_api_key=KEY, behaviours=behaviours)
    async with Simulator(config) as sim:
        yield sim


def fleet_settings(base: Settings, sim: Simulator) -> Settings:
    account = SendGridAccount(
        api_key=SecretStr(KEY),
        base_url=sim.url,
        from_email="noreply@example.com",
        rate_per_second=RATE,
        timeout=5,
    )
    return base.model_copy(
        update={
            "accounts": {ACCOUNT: account},
            "providers": {**base.providers, "email": ACCOUNT},
            # Open long enough that no probe goes out during the test.
            "breaker": BreakerSettings(consecutive_failures=THRESHOLD, open_seconds=60),
            "retry": RetrySettings(base_delay=0.2, max_delay=0.5, max_attempts=20),
            "rate_limits": RateLimitSettings(burst_seconds=0.1),
        }
    )


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
async def test_three_dispatchers_spend_one_threshold_on_a_dead_provider(
    settings: Settings, dead_sendgrid: Simulator, client: httpx.AsyncClient
) -> None:
    await put_type(client, "news", priority="normal", channels=("email",))
    for n in range(60):
        answer = await post(client, {"type": "news", "to": {"email": f"u{n}@example.com"}})
        assert answer.status_code == 202, answer.text
    fleet_settings_ = fleet_settings(settings, dead_sendgrid)
    services = [Service.from_settings(fleet_settings_) for _ in range(3)]
    providers = [providers_from_settings(fleet_settings_) for _ in services]
    dispatchers = [assemble_dispatcher(s, p) for s, p in zip(services, providers, strict=True)]
    stop = asyncio.Event()
    runs = [asyncio.create_task(d.run(stop)) for d in dispatchers]
    sendgrid = dead_sendgrid.state("sendgrid")
    try:
        deadline = time.monotonic() + 60
        while not all(_holds(d) for d in dispatchers):
            assert time.monotonic() < deadline, [_status(d) for d in dispatchers]
            await asyncio.sleep(0.05)
        spent = sendgrid.counts["requests"]
        await asyncio.sleep(1.5)  # all hold: nothing more goes out
        assert sendgrid.counts["requests"] == spent
    finally:
        stop.set()
        await asyncio.gather(*runs)
        for service, each in zip(services, providers, strict=True):
            await each.close()
            await service.close()
    # One threshold, and what went out while the news of it travelled (a share interval
    # and a report at one attempt a second per dispatcher); three thresholds would be 15.
    assert THRESHOLD <= spent <= 2 * THRESHOLD - 1, spent


def _holds(dispatcher: Dispatcher) -> bool:
    return dispatcher.protection.breaker.state(ACCOUNT).status is BreakerStatus.OPEN


def _status(dispatcher: Dispatcher) -> str:
    return dispatcher.protection.breaker.state(ACCOUNT).status.value


async def test_a_peers_own_opening_holds_and_a_followed_one_is_not_passed_on(
    service: Service,
) -> None:
    db = service.db
    opener, follower, third = CircuitBreaker(), CircuitBreaker(), CircuitBreaker()
    for _ in range(5):
        opener.record_failure(ACCOUNT)
    await provider_state.report(db, "opener", opener.snapshot(), utcnow())
    share = BreakerShare(db, follower, "follower")
    await share.follow([ACCOUNT], await share._peers())
    assert follower.state(ACCOUNT).status is BreakerStatus.OPEN
    assert 0 < follower.retry_in(ACCOUNT) <= opener.retry_in(ACCOUNT) + 0.5
    # The opener closes (its probe got through) and says so; the follower's report still
    # shows its followed opening, which a third dispatcher must not take up.
    await provider_state.forget(db, "opener")
    await provider_state.report(db, "follower", follower.snapshot(), utcnow())
    share = BreakerShare(db, third, "third")
    await share.follow([ACCOUNT], await share._peers())
    assert third.state(ACCOUNT).status is BreakerStatus.CLOSED


async def test_a_stale_report_is_not_followed(service: Service) -> None:
    opener, other = CircuitBreaker(), CircuitBreaker()
    for _ in range(5):
        opener.record_failure(ACCOUNT)
    gone = utcnow() - timedelta(seconds=30)  # a dispatcher killed long ago
    await provider_state.report(service.db, "gone", opener.snapshot(), gone)
    share = BreakerShare(service.db, other, "other")
    await share.follow([ACCOUNT], await share._peers())
    assert other.state(ACCOUNT).status is BreakerStatus.CLOSED
