"""Which offsets a worker may commit: those below the first message still in progress.

A message is done when its delivery's outcome is written (or when it was a duplicate). A
partition's committed offset only moves past a contiguous run of done messages, so a crash
redelivers at most the messages that were in progress, and their tickets find their rows
no longer QUEUED.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

Partition = Any  # aiokafka's TopicPartition (hashable: topic, partition)


@dataclass
class _Progress:
    started: deque[int] = field(default_factory=deque)  # in order of arrival (ascending)
    done: set[int] = field(default_factory=set)
    next_offset: int | None = None  # the next offset to commit
    committed: int | None = None


class OffsetTracker:
    def __init__(self) -> None:
        self._partitions: dict[Partition, _Progress] = {}

    def started(self, partition: Partition, offset: int) -> None:
        self._partitions.setdefault(partition, _Progress()).started.append(offset)

    def done(self, partition: Partition, offset: int) -> None:
        """A message of a partition since revoked is ignored: its new owner reads it again."""
        progress = self._partitions.get(partition)
        if progress is not None:
            progress.done.add(offset)

    def committable(self) -> dict[Partition, int]:
        """The offset to commit per partition (the next one to read), where it moved since
        the last commit (``committed``)."""
        found: dict[Partition, int] = {}
        for partition, progress in self._partitions.items():
            while progress.started and progress.started[0] in progress.done:
                offset = progress.started.popleft()
                progress.done.discard(offset)
                progress.next_offset = offset + 1
            if progress.next_offset is not None and progress.next_offset != progress.committed:
                found[partition] = progress.next_offset
        return found

    def committed(self, offsets: Mapping[Partition, int]) -> None:
        for partition, offset in offsets.items():
            progress = self._partitions.get(partition)
            if progress is not None:
                progress.committed = offset

    def rewind(self, partition: Partition, offset: int) -> None:
        """The messages from ``offset`` on will be read again: forget that they started."""
        progress = self._partitions.get(partition)
        if progress is None:
            return
        progress.started = deque(o for o in progress.started if o < offset)
        progress.done = {o for o in progress.done if o < offset}

    def in_progress(self) -> int:
        return sum(len(p.started) - len(p.done) for p in self._partitions.values())

    def forget(self, partitions: Iterable[Partition]) -> None:
        for partition in partitions:
            self._partitions.pop(partition, None)
