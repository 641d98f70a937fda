"""What the dispatcher asks of a lane, whichever transport it claims through."""

from __future__ import annotations

import asyncio
from typing import Protocol

from tidings.dispatch.lanes.progress import LaneProgress
from tidings.priorities import Priority


class Lane(Protocol):
    """One priority's claim loop: the direct lane (``direct.DirectLane``, due rows of the
    database) and the Kafka lane (``kafka.KafkaLane``, tickets of the relays' topics)."""

    @property
    def priority(self) -> Priority: ...

    @property
    def progress(self) -> LaneProgress:
        """What the lane did, for the dispatcher's report, /metrics and /readyz."""
        ...

    @property
    def in_flight(self) -> int:
        """Sends started and not finished."""
        ...

    async def run(self, stop: asyncio.Event) -> None:
        """Claim and send until ``stop`` (restarted when it stalls)."""
        ...

    async def drain(self, grace: float) -> None:
        """After ``run``: wait up to ``grace`` seconds for in-flight sends, then give back
        the rest (their deliveries released, none lost)."""
        ...
