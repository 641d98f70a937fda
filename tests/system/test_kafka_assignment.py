"""Kafka lanes read the partitions they compute from the live workers of their priority
(transport/assignment.py), not those a broker's consumer group hands out.

In the fault harness at full length tansu kept the groups of two lanes with both workers
as members and no partition assigned; every consumer of such a group waited without end,
and restarting the lane rejoined the same group. The state is made here by a foreign
member that leads the groups and assigns nothing to anyone: with a group-managed lane
(the old code) nothing is sent; lanes that assign themselves send everything."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.coordinator.assignors.abstract import AbstractPartitionAssignor
from aiokafka.coordinator.protocol import (
    ConsumerProtocolMemberAssignment,
    ConsumerProtocolMemberMetadata,
)

from tests.helpers import eventually
from tests.kafka_broker import Broker
from tests.system.test_kafka_transport import until_all
from tests.system.test_lane_stall import COUNT, accept_low, kafka_settings
from tidings.assembly import assemble_dispatcher
from tidings.background.relay import Relay
from tidings.dispatch.lanes.kafka import WorkerPlan
from tidings.priorities import Channel, Priority
from tidings.providers.testing import ScriptedProvider
from tidings.service import Service
from tidings.settings import Settings
from tidings.states import Status
from tidings.transport.assignment import partitions_of
from tidings.transport.topics import ensure_topics, group_id, topic_name

ON_POSTGRES = pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
LOW_EMAIL = topic_name(Priority.LOW, Channel.EMAIL)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    broker = Broker(tmp_path_factory.mktemp("tansu") / "tansu.log").start()
    yield broker
    broker.stop()


def test_each_partition_has_one_reader_and_a_lone_worker_reads_all() -> None:
    partitions = {"a": range(6), "b": range(3)}
    readers = {"a": ["w1", "w2"], "b": ["w1"]}
    first = partitions_of("w1", readers, partitions)
    second = partitions_of("w2", readers, {"a": partitions["a"]})  # w2 reads only "a"
    assert first & second == set()
    assert first | second == {(t, p) for t, ids in partitions.items() for p in ids}
    assert {p for t, p in second} == {1, 3, 5} and all(t == "a" for t, _ in second)
    # Not yet seen in the reports (just started): it counts itself in.
    assert partitions_of("w3", {}, partitions) == first | second


class NothingToAnyone(AbstractPartitionAssignor):  # type: ignore[misc]
    """A group leader that assigns no partition to any member (named as aiokafka's default
    assignor, so that the group agrees on it)."""

    name = "roundrobin"
    version = 0
    led = asyncio.Event()

    @classmethod
    def assign(cls, cluster: Any, members: dict[str, Any]) -> dict[str, Any]:
        cls.led.set()
        return {m: ConsumerProtocolMemberAssignment(cls.version, [], b"") for m in members}

    @classmethod
    def metadata(cls, topics: Any) -> Any:
        return ConsumerProtocolMemberMetadata(cls.version, list(topics), b"")

    @classmethod
    def on_assignment(cls, assignment: Any) -> None:
        return None


@contextlib.asynccontextmanager
async def groups_held_empty(broker: Broker, groups: list[str]) -> AsyncIterator[list[Any]]:
    """A foreign member leads each group (joined first) and hands out nothing."""
    members = []
    try:
        for group in groups:
            NothingToAnyone.led = asyncio.Event()
            member = AIOKafkaConsumer(
                LOW_EMAIL,
                bootstrap_servers=broker.bootstrap,
                group_id=group,
                partition_assignment_strategy=(NothingToAnyone,),
                session_timeout_ms=10_000,
            )
            members.append(member)
            await member.start()
            await asyncio.wait_for(NothingToAnyone.led.wait(), timeout=30)
        yield members
    finally:
        for member in members:
            await member.stop()


@ON_POSTGRES
async def test_a_lane_sends_while_its_group_holds_no_partition_for_anyone(
    client: httpx.AsyncClient, settings: Settings, broker: Broker
) -> None:
    service = Service.from_settings(kafka_settings(settings, broker))
    await ensure_topics(broker.bootstrap, service.settings.kafka, [LOW_EMAIL])
    # The lanes' old group, and the one their offsets are committed under now.
    groups = [f"tidings.{Priority.LOW.value}", group_id(Priority.LOW)]
    try:
        async with groups_held_empty(broker, groups) as foreign:
            await accept_low(client)
            provider = ScriptedProvider()
            plan = WorkerPlan(
                broker.bootstrap, service.settings.kafka, [Priority.LOW], [Channel.EMAIL]
            )
            worker = assemble_dispatcher(service, {c: provider for c in Channel}, worker=plan)
            stop = asyncio.Event()
            jobs = [asyncio.create_task(j.run(stop)) for j in (Relay(service), worker)]
            try:
                await until_all(service, Status.SENT, COUNT, within=90)
            finally:
                stop.set()
                await asyncio.wait_for(asyncio.gather(*jobs), timeout=60)
            assert len(provider.completed) == COUNT
            # The groups were still held: their members had no partition all along.
            assert all(member.assignment() == set() for member in foreign)
    finally:
        await service.close()


@ON_POSTGRES
async def test_two_workers_share_a_lane_and_one_takes_over_when_the_other_stops(
    client: httpx.AsyncClient, settings: Settings, broker: Broker
) -> None:
    service = Service.from_settings(kafka_settings(settings, broker))  # 2 partitions a topic
    try:
        plan = WorkerPlan(broker.bootstrap, service.settings.kafka, [Priority.LOW], [Channel.EMAIL])
        provider = ScriptedProvider()
        workers = [
            assemble_dispatcher(service, {c: provider for c in Channel}, worker=plan) for _ in "ab"
        ]
        lanes = [worker.lanes[0] for worker in workers]
        stops = [asyncio.Event(), asyncio.Event()]
        jobs = [asyncio.create_task(w.run(s)) for w, s in zip(workers, stops, strict=True)]
        relay_stop = asyncio.Event()
        jobs.append(asyncio.create_task(Relay(service).run(relay_stop)))
        try:
            await eventually(lambda: [lane.progress.assigned for lane in lanes] == [1, 1], 60)
            stops[0].set()
            await asyncio.wait_for(jobs[0], timeout=60)
            await eventually(lambda: lanes[1].progress.assigned == 2, within=30)
            await accept_low(client)
            await until_all(service, Status.SENT, COUNT, within=60)
            assert len(provider.completed) == COUNT
        finally:
            for stop in (*stops, relay_stop):
                stop.set()
            await asyncio.wait_for(asyncio.gather(*jobs), timeout=60)
    finally:
        await service.close()
