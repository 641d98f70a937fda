"""Leases follow the backlog: the relay keeps no more tickets in a topic than its workers
drain in half a queue lease (transport/pacing.py), so a backlog longer than the lease waits
PENDING in the database instead of expiring in the topic and being published again."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import httpx
import pytest
import sqlalchemy as sa

from tests.helpers import put_type
from tests.kafka_broker import Broker
from tests.system.test_kafka_transport import until_all
from tidings.assembly import assemble_dispatcher
from tidings.background.relay import Relay
from tidings.dispatch.lanes.kafka import WorkerPlan
from tidings.providers.accounts import AccountSettings
from tidings.providers.chains import ProviderSet
from tidings.providers.testing import ScriptedProvider
from tidings.service import Service
from tidings.settings import Settings
from tidings.states import Status
from tidings.store.queue import Count
from tidings.store.schema import delivery_event
from tidings.transport.pacing import LEASE_FILL, Pacing
from tidings.transport.settings import KafkaSettings

ON_POSTGRES = pytest.mark.parametrize("backend", ["postgresql"], indirect=True)

# The trial's proportions, shrunk: a backlog of 2,000 at a 30/s LOW share (the account's
# 50/s times LOW's 0.6) is 67 s of work, more than three 20 s queue leases.
BACKLOG = 2_000
RATE = 50.0
QUEUE_LEASE = 20.0


@pytest.fixture
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    broker = Broker(tmp_path_factory.mktemp("tansu") / "tansu.log").start()
    yield broker
    broker.stop()


@pytest.fixture
def settings(settings: Settings, broker: Broker) -> Settings:
    kafka = KafkaSettings(
        partitions=2, queue_lease_seconds=QUEUE_LEASE, relay_batch=100, commit_interval=0.2
    )
    return settings.model_copy(
        update={"transport": "kafka", "kafka_bootstrap": broker.bootstrap, "kafka": kafka}
    )


def test_a_topic_holds_what_its_workers_drain_in_half_a_lease() -> None:
    pacing = Pacing(lease_seconds=20, max_queued=20_000, floor=100)
    low = ("low", "email")
    assert pacing.cap(low) == 100  # drain rate unknown yet: the floor
    pacing.observe({low: Count(queued=100, fresh=100)}, 1.0)  # the start
    pacing.observe({low: Count(queued=100, fresh=30)}, 1.0)  # 30 taken in a second
    assert pacing.rates[low] == 30
    assert pacing.cap(low) == int(30 * 20 * LEASE_FILL)
    pacing.observe({low: Count(queued=0, fresh=0)}, 1.0)  # ran dry: 100 in a second
    assert pacing.cap(low) == int(100 * 20 * LEASE_FILL)
    pacing.observe({}, 1.0)  # nothing queued, nothing published: no news of the rate
    assert pacing.rates[low] == 100
    assert Pacing(lease_seconds=3_600, max_queued=500, floor=100).cap(low) == 100
    big = Pacing(lease_seconds=3_600, max_queued=500, floor=100)
    big.observe({low: Count(0, 0)}, 1.0)
    big.observe({low: Count(queued=0, fresh=100)}, 1.0)
    assert big.cap(low) == 500  # never above max_queued


@ON_POSTGRES
async def test_a_low_backlog_longer_than_the_lease_drains_without_expiring(
    client: httpx.AsyncClient, service: Service
) -> None:
    """2,000 LOW emails at a 30/s share with a 20 s queue lease: every one is sent once,
    no queue lease expires and no ticket is published twice."""
    await put_type(client, "promo", category="marketing", priority="low", channels=("email",))
    for start in range(0, BACKLOG, 500):
        batch = [
            {"idempotencyKey": str(uuid.uuid4()), "type": "promo", "to": {"email": f"u{n}@x.io"}}
            for n in range(start, start + 500)
        ]
        answer = await client.post("/v1/notifications/batch", json={"notifications": batch})
        assert answer.status_code == 200, answer.text
    provider = ScriptedProvider("sg")
    account = AccountSettings(kind="scripted", rate_per_second=RATE)
    providers = ProviderSet({"sg": provider}, {"email": ["sg"]}, {"sg": account})
    assert service.settings.kafka_bootstrap
    plan = WorkerPlan(service.settings.kafka_bootstrap, service.settings.kafka)
    relay = Relay(service)
    stop = asyncio.Event()
    jobs = [
        asyncio.create_task(relay.run(stop)),
        asyncio.create_task(assemble_dispatcher(service, providers, worker=plan).run(stop)),
    ]
    try:
        await until_all(service, Status.SENT, BACKLOG, within=600)
    finally:
        stop.set()
        await asyncio.wait_for(asyncio.gather(*jobs), timeout=60)
    sent = [call.delivery_id for call in provider.completed]
    assert len(sent) == BACKLOG == len(set(sent))
    async with service.db.engine.connect() as conn:
        kinds = sa.select(delivery_event.c.kind, sa.func.count()).group_by(delivery_event.c.kind)
        events = dict((await conn.execute(kinds)).all())
    assert events.get("queue_expired", 0) == 0, events
    assert relay.published == BACKLOG  # no ticket published twice
