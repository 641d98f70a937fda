"""Which partitions a worker's lane reads: computed by the lanes themselves, not the broker.

A lane does not join a consumer group: a broker can keep a group with members and no
partition assigned (tansu did, after workers restarted during a database outage), and every
consumer of that group then waits without end. Instead each lane reads the partitions it
computes from the live workers of its priority (those whose dispatcher reported that lane
recently, store/provider_state.py): partition *i* of a topic goes to worker *i mod n* of the
sorted live workers that read that topic. Workers that see the fleet differently for a
moment (one just started, one just died) read a partition twice or leave it unread until
the next report; both are harmless: a ticket's claim is atomic and a duplicate is dropped,
and an unread ticket waits in its partition.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping


def partitions_of(
    member: str,
    readers: Mapping[str, Iterable[str]],
    partitions: Mapping[str, Iterable[int]],
) -> set[tuple[str, int]]:
    """The ``(topic, partition)`` pairs ``member`` reads, given each topic's live readers
    (``member`` counts as one of every topic's, live or not yet seen) and partitions."""
    mine: set[tuple[str, int]] = set()
    for topic, ids in partitions.items():
        live = sorted(set(readers.get(topic, ())) | {member})
        index = live.index(member)
        mine.update((topic, p) for i, p in enumerate(sorted(ids)) if i % len(live) == index)
    return mine
