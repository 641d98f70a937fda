"""Topic names (``tidings.<priority>.<channel>``) and their creation when missing."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic
from aiokafka.errors import IncompatibleBrokerVersion, KafkaError

from tidings.priorities import Channel, Priority
from tidings.transport.settings import KafkaSettings

log = logging.getLogger(__name__)

PREFIX = "tidings"


def topic_name(priority: Priority | str, channel: Channel | str) -> str:
    return f"{PREFIX}.{Priority(priority).value}.{Channel(channel).value}"


def all_topics(
    priorities: Iterable[Priority] = Priority, channels: Iterable[Channel] = Channel
) -> list[str]:
    wanted = list(channels)
    return [topic_name(p, c) for p in priorities for c in wanted]


def group_id(priority: Priority) -> str:
    """The group under which a lane's offsets are committed. No consumer joins it (lanes
    compute their partitions themselves, transport/assignment.py), so that no member the
    broker keeps in it can refuse the lanes' commits."""
    return f"{PREFIX}.{priority.value}.offsets"


async def ensure_topics(bootstrap: str, settings: KafkaSettings, topics: Iterable[str]) -> int:
    """Create the topics the broker lacks, and grow those with fewer partitions than
    configured (a broker that made one itself, as tansu does with 4); the number created."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, client_id=settings.client_id)
    await admin.start()
    try:
        wanted = set(topics)
        missing = sorted(wanted - set(await admin.list_topics()))
        created: list[str] = []
        if missing:
            new = [NewTopic(t, settings.partitions, settings.replication_factor) for t in missing]
            answer = await admin.create_topics(new)
            # A topic made meanwhile (by another relay, or by the broker on a produce) is
            # answered with an error per topic, not raised: only those without were created.
            created = [t for t, code, *_ in answer.topic_errors if code == 0]
            if created:
                log.info("created topics: %s", ", ".join(sorted(created)))
        await _grow(admin, settings.partitions, sorted(wanted - set(created)))
        return len(created)
    finally:
        await admin.close()


async def _grow(admin: AIOKafkaAdminClient, partitions: int, topics: list[str]) -> None:
    """Give the topics with fewer partitions than ``partitions`` the rest (a lane reads
    what there is either way: fewer partitions only spread the work less)."""
    if not topics:
        return
    short = {
        found["topic"]: len(found["partitions"])
        for found in await admin.describe_topics(topics)
        if 0 < len(found["partitions"]) < partitions
    }
    if not short:
        return
    try:
        await admin.create_partitions({t: NewPartitions(partitions) for t in short})
    except (IncompatibleBrokerVersion, KafkaError) as error:
        for topic, count in sorted(short.items()):
            log.warning(
                "topic %s has %d partitions, fewer than the %d configured, and the broker "
                "did not add them (%s)",
                topic,
                count,
                partitions,
                type(error).__name__,
            )
        return
    log.info("topics grown to %d partitions: %s", partitions, ", ".join(sorted(short)))
