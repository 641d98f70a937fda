"""Limits shared through a real Redis (dispatch/protection/redis_limits.py and
redis_guards.py): two limiters (two processes' worth) never grant more than the account's
rate between them, the priority shares hold across them, dedup keys and in-flight slots are
fleet-wide, and an unreachable Redis falls back to this process's share, never to unlimited."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis

from tests.helpers import email_to, eventually, post, put_type, running_dispatcher
from tests.processes import free_port
from tidings.clock import utcnow
from tidings.dispatch.protection.breaker import BreakerStatus, CircuitBreaker
from tidings.dispatch.protection.redis_guards import (
    BreakerSync,
    Busy,
    Go,
    RedisDedup,
    RedisSlots,
    SentBefore,
)
from tidings.dispatch.protection.redis_health import RedisHealth
from tidings.dispatch.protection.redis_limits import RedisRateLimiter
from tidings.priorities import Priority
from tidings.providers.testing import ScriptedProvider
from tidings.service import Service
from tidings.states import FailureKind, Status
from tidings.store import tracking
from tidings.store.tracking import DeliveryKey, Failure, Tracked

REDIS_URL = "redis://127.0.0.1:6379/0"
RATE = 40.0


@pytest.fixture
async def redis_client() -> AsyncIterator[aioredis.Redis]:
    found = aioredis.Redis.from_url(REDIS_URL, socket_timeout=0.5, socket_connect_timeout=0.5)
    yield found
    await found.aclose()


def limiter(client: aioredis.Redis, account: str) -> RedisRateLimiter:
    return RedisRateLimiter(client, RedisHealth(), {account: RATE}, burst_seconds=0.5)


async def offer(
    limiters: list[RedisRateLimiter], account: str, priority: Priority, seconds: float
) -> int:
    """Ask every limiter for tokens in a tight loop for ``seconds``; tokens granted."""
    granted = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for each in limiters:
            granted += await each.acquire(account, priority, 5)
        await asyncio.sleep(0.005)
    return granted


async def test_two_limiters_share_one_rate(redis_client: aioredis.Redis) -> None:
    account = f"acct-{uuid.uuid4().hex}"
    pair = [limiter(redis_client, account), limiter(redis_client, account)]
    granted = await offer(pair, account, Priority.HIGH, 3.0)
    # At most R * W + C between the two (C = R * 0.5 s), and most of it used.
    assert 0.9 * RATE * 3 <= granted <= RATE * 3 + RATE * 0.5 + 1, granted


async def test_the_low_share_holds_across_processes(redis_client: aioredis.Redis) -> None:
    account = f"acct-{uuid.uuid4().hex}"
    pair = [limiter(redis_client, account), limiter(redis_client, account)]
    low = await offer(pair, account, Priority.LOW, 3.0)
    assert low <= 0.6 * (RATE * 3 + RATE * 0.5) + 1, low
    # HIGH still finds the reserve the LOW traffic had to leave.
    assert await pair[0].acquire(account, Priority.HIGH, 5) >= 1


async def test_unreachable_redis_falls_back_to_this_process_share() -> None:
    dead = aioredis.Redis.from_url(
        f"redis://127.0.0.1:{free_port()}/0", socket_timeout=0.2, socket_connect_timeout=0.2
    )
    account = "acct"
    alone = limiter(dead, account)
    alone.set_share(0.5)  # two live dispatchers
    granted = await offer([alone], account, Priority.HIGH, 2.0)
    assert not alone.health.up and alone.health.last_error
    # Half the rate: 20/s over 2 s, plus its (halved) bucket; never unlimited.
    assert granted <= 0.5 * RATE * 2 + 0.5 * RATE * 0.5 + 1, granted
    assert granted >= 0.5 * RATE * 2 * 0.8, granted
    await dead.aclose()


async def test_a_dedup_key_stops_a_second_send(redis_client: aioredis.Redis) -> None:
    health = RedisHealth()
    dedup = RedisDedup(redis_client, health, sending_ttl=5)
    delivery = uuid.uuid4()
    assert await dedup.begin(delivery, 1) == Go()
    busy = await dedup.begin(delivery, 2)  # attempt 2 while attempt 1 is still sending
    assert isinstance(busy, Busy) and 0 < busy.seconds <= 5
    await dedup.finish(delivery, ("sendgrid-main", "msg-1"))
    assert await dedup.begin(delivery, 3) == SentBefore("sendgrid-main", "msg-1")
    other = uuid.uuid4()
    assert await dedup.begin(other, 1) == Go()
    await dedup.finish(other, None)  # failed: the retry may go
    assert await dedup.begin(other, 2) == Go()


async def test_in_flight_slots_are_fleet_wide_and_leases_expire(
    redis_client: aioredis.Redis,
) -> None:
    account = f"acct-{uuid.uuid4().hex}"
    slots = [
        RedisSlots(redis_client, RedisHealth(), {account: 2}, lease_seconds=1.0) for _ in range(2)
    ]
    inside = 0
    most = 0

    async def hold(each: RedisSlots) -> None:
        nonlocal inside, most
        async with each.slot(account):
            inside += 1
            most = max(most, inside)
            await asyncio.sleep(0.05)
            inside -= 1

    await asyncio.gather(*(hold(slots[n % 2]) for n in range(10)))
    assert most == 2
    # A holder that never gives its slot back (a killed process) holds it for its lease only.
    leaked = [slots[0].slot(account) for _ in range(2)]  # both slots, never given back
    for held in leaked:
        await held.__aenter__()
    started = time.monotonic()
    async with slots[1].slot(account):
        waited = time.monotonic() - started
    assert 0.5 <= waited <= 2.0, waited


async def test_an_open_breaker_opens_for_every_dispatcher(redis_client: aioredis.Redis) -> None:
    account = f"acct-{uuid.uuid4().hex}"
    seeing, others = CircuitBreaker(), CircuitBreaker()
    for _ in range(5):
        seeing.record_failure(account)
    assert seeing.state(account).status is BreakerStatus.OPEN
    await BreakerSync(redis_client, RedisHealth(), seeing).sync([account])
    assert others.state(account).status is BreakerStatus.CLOSED
    await BreakerSync(redis_client, RedisHealth(), others).sync([account])
    assert others.state(account).status is BreakerStatus.OPEN
    assert 0 < others.retry_in(account) <= seeing.retry_in(account) + 0.1


# --- an outage of a Redis of the test's own --------------------------------------------------


async def test_a_dispatcher_on_redis_sends_and_leaves_dedup_keys(
    redis_client: aioredis.Redis, service: Service, client: httpx.AsyncClient
) -> None:
    api = client
    service.settings.redis_url = REDIS_URL
    await put_type(api)
    ids = []
    for n in range(5):
        answer = await post(api, email_to(f"r{n}@example.com"))
        ids.append(answer.json()["deliveries"][0]["id"])
    provider = ScriptedProvider()
    async with running_dispatcher(service, provider) as dispatcher:
        assert dispatcher.coordination.mode == "redis"
        await eventually(lambda: len(provider.completed) == 5, within=10)
    for delivery_id in ids:
        value = await redis_client.get(f"tidings:send:{delivery_id}")
        assert value is not None and value.decode().startswith("sent:"), value


async def test_a_replay_after_the_provider_failed_a_sent_delivery_sends_it_again(
    redis_client: aioredis.Redis, service: Service, client: httpx.AsyncClient
) -> None:
    """SENT, then the provider's callback failed it, then an operator replays it: the dedup
    key still says ``sent``, but that send is the one that failed, so this one goes out
    (a key from a send whose outcome was lost would still stop it: the row would not know
    its message id)."""
    service.settings.redis_url = REDIS_URL
    await put_type(client)
    answer = await post(client, email_to("again@example.com"))
    delivery_id = answer.json()["deliveries"][0]["id"]
    provider = ScriptedProvider()
    async with running_dispatcher(service, provider):
        await eventually(lambda: len(provider.completed) == 1, within=10)

        async def status() -> str:
            shown = (await client.get(f"/v1/notifications/{answer.json()['id']}")).json()
            return str(shown["deliveries"][0]["status"])

        await eventually(lambda: _is(status(), "SENT"), within=10)
        dropped = Tracked(
            DeliveryKey(uuid.UUID(delivery_id), None),
            "dropped",
            utcnow(),
            status=Status.FAILED,
            failure=Failure(FailureKind.PERMANENT, "dropped"),
        )
        await tracking.apply(service.db, provider.name, "email", [dropped], utcnow())
        assert await status() == "FAILED"
        replayed = await client.post(f"/v1/deliveries/{delivery_id}/replay")
        assert replayed.status_code == 200, replayed.text
        await eventually(lambda: len(provider.completed) == 2, within=10)
        await eventually(lambda: _is(status(), "SENT"), within=10)


async def _is(value: Any, expected: str) -> bool:
    return bool(await value == expected)


async def test_readyz_tells_whether_redis_answers(
    service: Service, client: httpx.AsyncClient
) -> None:
    service.settings.redis_url = REDIS_URL
    ready = await client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["redis"] == "up"
    service.settings.redis_url = f"redis://127.0.0.1:{free_port()}/0"
    degraded = await client.get("/readyz")
    # Still ready: the dispatchers fall back to their own shares; the answer says so.
    assert degraded.status_code == 200
    assert degraded.json()["redis"].startswith("unreachable")


async def test_providers_show_how_limits_are_shared(
    service: Service, client: httpx.AsyncClient
) -> None:
    service.settings.redis_url = REDIS_URL
    async with running_dispatcher(service, ScriptedProvider()):

        async def reported() -> list[dict[str, object]]:
            shown = (await client.get("/v1/providers")).json()
            return [b["state"]["coordination"] for a in shown["accounts"] for b in a["breakers"]]

        found = await eventually(reported, within=10)
    assert found[0]["mode"] == "redis" and found[0]["localShare"] == 1.0
    assert found[0]["redis"] == {"up": True, "downSince": None, "lastError": None}
