"""A stalled lane is seen and restarts itself; a hung step does not keep a worker from
stopping (dispatch/lanes/progress.py).

The stall is made by wedging the lane's step: it waits on an event the test holds, deaf to
the lane's stop, as a step did in the fault trial when an await inside it never returned
(aiokafka's ``position()`` waits without end for a partition whose offset reset never
succeeds). The lane must notice (due work, nothing moved for ``stall_seconds``), say so in
/readyz, /metrics and its report, and start a new session, which for a Kafka lane is a new
consumer in its group."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from tests.helpers import eventually, put_type
from tests.kafka_broker import Broker
from tests.system.test_kafka_transport import until_all
from tidings.assembly import assemble_dispatcher
from tidings.background.relay import Relay
from tidings.dispatch.dispatcher import Dispatcher
from tidings.dispatch.lanes.direct import DirectLane
from tidings.dispatch.lanes.kafka import KafkaLane, WorkerPlan
from tidings.dispatch.lanes.lane import Lane
from tidings.dispatch.lanes.settings import Lanes, LaneSettings
from tidings.priorities import Channel, Priority
from tidings.providers.testing import ScriptedProvider
from tidings.service import Service
from tidings.settings import Settings
from tidings.states import Status
from tidings.transport.settings import KafkaSettings

ON_POSTGRES = pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
COUNT = 20


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    broker = Broker(tmp_path_factory.mktemp("tansu") / "tansu.log").start()
    yield broker
    broker.stop()


@pytest.fixture
def settings(settings: Settings) -> Settings:
    low = LaneSettings(concurrency=8, stall_seconds=1, poll_interval=0.1)
    return settings.model_copy(update={"lanes": Lanes(low=low), "shutdown_grace": 1.0})


def kafka_settings(settings: Settings, broker: Broker) -> Settings:
    kafka = KafkaSettings(partitions=2, queue_lease_seconds=60, commit_interval=0.1)
    return settings.model_copy(
        update={"transport": "kafka", "kafka_bootstrap": broker.bootstrap, "kafka": kafka}
    )


@dataclass
class Wedge:
    released: asyncio.Event = field(default_factory=asyncio.Event)
    entered: asyncio.Event = field(default_factory=asyncio.Event)


def wedge(lane: Lane) -> Wedge:
    """Make every step of ``lane`` hang until the wedge is released."""
    assert isinstance(lane, DirectLane | KafkaLane)  # each transport's own step
    found = Wedge()
    step: Callable[..., Any] = lane._step

    async def wedged(*args: Any) -> None:
        found.entered.set()
        await found.released.wait()
        await step(*args)

    lane._step = wedged  # type: ignore[method-assign]
    return found


async def accept_low(client: httpx.AsyncClient) -> None:
    await put_type(client, "promo", category="marketing", priority="low", channels=("email",))
    batch = [
        {"idempotencyKey": str(uuid.uuid4()), "type": "promo", "to": {"email": f"u{n}@x.io"}}
        for n in range(COUNT)
    ]
    answer = await client.post("/v1/notifications/batch", json={"notifications": batch})
    assert answer.status_code == 200, answer.text


async def stall_is_reported_then_cleared(
    client: httpx.AsyncClient, service: Service, dispatcher: Dispatcher
) -> None:
    lane = next(lane for lane in dispatcher.lanes if lane.priority is Priority.LOW)
    released = wedge(lane).released
    stop = asyncio.Event()
    running = asyncio.create_task(dispatcher.run(stop))
    try:
        await eventually(lambda: lane.progress.stalled_since is not None, within=30)
        ready = await client.get("/readyz")
        assert ready.status_code == 503 and ready.json()["error"]["code"] == "lane_stalled"
        scrape = (await client.get("/metrics")).text.splitlines()
        transport = lane.progress.transport
        assert f'tidings_lane_stalled{{priority="low",transport="{transport}"}} 1.0' in scrape
        released.set()
        await until_all(service, Status.SENT, COUNT, within=60)
        assert lane.progress.restarts >= 1 and lane.progress.sends == COUNT
        assert lane.progress.stalled_since is None
        assert (await client.get("/readyz")).status_code == 200
        await eventually(lambda: reported_low(client, lane.progress.restarts), within=20)
    finally:
        released.set()
        stop.set()
        await asyncio.wait_for(running, timeout=60)


async def reported_low(client: httpx.AsyncClient, restarts: int) -> bool:
    """GET /v1/providers shows the LOW lane's restarts and sends in its lanes section."""
    answer = await client.get("/v1/providers")
    assert answer.status_code == 200, answer.text
    lanes = [lane for d in answer.json()["lanes"] for lane in d["lanes"]]
    low = [lane for lane in lanes if lane["priority"] == "low"]
    return any(lane["restarts"] == restarts and lane["sends"] == COUNT for lane in low)


@ON_POSTGRES
async def test_a_stalled_kafka_lane_is_seen_and_rejoins_its_group(
    client: httpx.AsyncClient, settings: Settings, broker: Broker
) -> None:
    service = Service.from_settings(kafka_settings(settings, broker))
    try:
        await accept_low(client)
        provider = ScriptedProvider()
        plan = WorkerPlan(broker.bootstrap, service.settings.kafka, priorities=[Priority.LOW])
        worker = assemble_dispatcher(service, {c: provider for c in Channel}, worker=plan)
        stop = asyncio.Event()
        relay = asyncio.create_task(Relay(service).run(stop))
        try:
            await stall_is_reported_then_cleared(client, service, worker)
        finally:
            stop.set()
            await asyncio.wait_for(relay, timeout=60)
    finally:
        await service.close()


async def test_a_stalled_direct_lane_is_seen_and_restarts(
    client: httpx.AsyncClient, service: Service
) -> None:
    await accept_low(client)
    dispatcher = assemble_dispatcher(service, {c: ScriptedProvider() for c in Channel})
    await stall_is_reported_then_cleared(client, service, dispatcher)


@ON_POSTGRES
async def test_a_worker_stops_when_told_even_while_a_step_hangs(
    client: httpx.AsyncClient, settings: Settings, broker: Broker
) -> None:
    """The trial's workers ignored SIGTERM: a lane's loop never came back to see ``stop``."""
    service = Service.from_settings(kafka_settings(settings, broker))
    try:
        plan = WorkerPlan(broker.bootstrap, service.settings.kafka, priorities=[Priority.LOW])
        worker = assemble_dispatcher(service, {c: ScriptedProvider() for c in Channel}, worker=plan)
        wedged = wedge(worker.lanes[0])  # never released
        stop = asyncio.Event()
        running = asyncio.create_task(worker.run(stop))
        await asyncio.wait_for(wedged.entered.wait(), timeout=60)
        stop.set()
        await asyncio.wait_for(running, timeout=60)
    finally:
        await service.close()
