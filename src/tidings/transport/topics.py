"""Topic names (``tidings.<priority>.<channel>``) and their creation when missing."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError

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
    """Create the topics the broker lacks; the number created."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, client_id=settings.client_id)
    await admin.start()
    try:
        missing = sorted(set(topics) - set(await admin.list_topics()))
        if not missing:
            return 0
        new = [NewTopic(t, settings.partitions, settings.replication_factor) for t in missing]
        try:
            await admin.create_topics(new)
        except TopicAlreadyExistsError:
            pass  # another relay created them meanwhile
        log.info("created topics: %s", ", ".join(missing))
        return len(missing)
    finally:
        await admin.close()
