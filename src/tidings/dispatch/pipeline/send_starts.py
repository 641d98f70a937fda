"""Start marks: before an at-most-once account's provider call, the delivery's row records
that the call is starting (docs/architecture.md, Claims, leases, fences and the reaper).

Each send awaits its mark before calling the provider, so a mark costs a round trip to the
database; concurrent sends share it (a group commit): a mark queued while another group is
being written goes with the next group, up to ``max_in_flight`` groups at once (the intake's
group commit, tidings/group_commit.py). Each send learns whether its fence held: one that
did not is no longer its attempt's, and is not sent.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence

from tidings.clock import utcnow
from tidings.group_commit import GroupCommit
from tidings.store.claims import ClaimedDelivery
from tidings.store.engine import Database
from tidings.store.outcomes import SendStart, mark_sends_started

log = logging.getLogger(__name__)

Mark = Callable[[Sequence[SendStart]], Awaitable[set[uuid.UUID]]]
# Awaited by the sender just before the provider call: None to call it, else why not.
Begin = Callable[[], Awaitable[str | None]]


class SendStarts:
    def __init__(
        self, db: Database, max_in_flight: int = 2, max_group: int = 1000, mark: Mark | None = None
    ) -> None:
        self._mark = mark or (lambda starts: mark_sends_started(db, starts, utcnow()))
        # A cancelled write (shutdown) cancels its sends: the marks' state is unknown, and
        # none of them is sent.
        self._group = GroupCommit(self._write, max_group, max_in_flight, cancel_waiters=True)

    async def started(self, start: SendStart) -> bool:
        """Record ``start`` durably; whether its fence held (False: do not send). Raises
        what the database raised (the mark's state is then unknown: do not send either)."""
        (held,) = await self._group.submit([start])
        return held

    def begin(self, delivery: ClaimedDelivery, account: str, started: set[uuid.UUID]) -> Begin:
        """The start mark of one send, for the sender to await just before the provider
        call; a send whose mark held joins ``started`` (perhaps sent from then on)."""

        async def begin() -> str | None:
            start = SendStart(
                delivery_id=delivery.id, claimed_attempts=delivery.attempts, account=account
            )
            try:
                if not await self.started(start):
                    return "lease lost"  # claimed again since: that attempt sends
            except Exception as error:
                log.warning("recording a send's start failed (%s)", type(error).__name__)
                return "start not recorded"
            started.add(delivery.id)
            return None

        return begin

    async def _write(self, starts: Sequence[SendStart]) -> list[bool]:
        marked = await self._mark(starts)
        return [start.delivery_id in marked for start in starts]
