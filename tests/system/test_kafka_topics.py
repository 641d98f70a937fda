"""Topic creation (transport/topics.py) against tansu: a topic is said to be created only
when it was, and one with fewer partitions than configured (tansu makes a topic a producer
names with 4) is grown, or, where the broker cannot (tansu has no CreatePartitions), said
so with its count."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from tests.kafka_broker import Broker
from tidings.transport.settings import KafkaSettings
from tidings.transport.topics import ensure_topics


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    broker = Broker(tmp_path_factory.mktemp("tansu") / "tansu.log").start()
    yield broker
    broker.stop()


async def partitions(broker: Broker, topic: str) -> int:
    admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
    await admin.start()
    try:
        if topic not in await admin.list_topics():
            await admin.create_topics([NewTopic(topic, 4, 1)])
        return len((await admin.describe_topics([topic]))[0]["partitions"])
    finally:
        await admin.close()


async def test_only_topics_made_are_said_created(
    broker: Broker, caplog: pytest.LogCaptureFixture
) -> None:
    settings = KafkaSettings(partitions=6)
    caplog.set_level("INFO", logger="tidings.transport.topics")
    assert await ensure_topics(broker.bootstrap, settings, ["fresh.a", "fresh.b"]) == 2
    assert "created topics: fresh.a, fresh.b" in caplog.text
    caplog.clear()
    assert await ensure_topics(broker.bootstrap, settings, ["fresh.a", "fresh.b"]) == 0
    assert "created" not in caplog.text and caplog.records == []


async def test_a_topic_with_fewer_partitions_is_grown_or_said_short(
    broker: Broker, caplog: pytest.LogCaptureFixture
) -> None:
    assert await partitions(broker, "short") == 4  # as tansu makes them on a produce
    caplog.set_level("INFO", logger="tidings.transport.topics")
    assert await ensure_topics(broker.bootstrap, KafkaSettings(partitions=6), ["short"]) == 0
    assert "created" not in caplog.text
    grown = await partitions(broker, "short")
    if grown == 6:
        assert "topics grown to 6 partitions: short" in caplog.text
    else:  # tansu: no CreatePartitions
        assert grown == 4
        assert "topic short has 4 partitions, fewer than the 6 configured" in caplog.text
