"""How many tickets a topic may hold: what its workers drain within part of a queue lease.

A ticket waits in its topic behind every ticket published before it. Published all at
once, a backlog the workers take longer than the queue lease to drain expires in the
topic: the reaper gives its rows back, the relay publishes them again, and the topic fills
with stale tickets (``max_queued`` 20,000 at a 30/s LOW share is 670 s of work against a
300 s lease). So the relay paces itself: it keeps at most ``LEASE_FILL`` of a lease's worth
of each topic's measured drain rate outstanding (QUEUED), and the rest of the backlog waits
PENDING in the database, where it cannot expire.

The drain rate is measured from the database alone, so that every relay sees the same: at
each count, a topic's QUEUED rows before, plus those made QUEUED since (by any relay), less
those QUEUED now, left the topic meanwhile. It errs low (a row published and taken between
two counts is not seen), which only makes the relay publish less ahead.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tidings.store.queue import Count

# The share of a queue lease the tickets a topic holds take to drain: the other half is
# the margin for a drain rate that falls after they were published.
LEASE_FILL = 0.5
# What a topic may hold before its drain rate is known: little, so that even a slow lane
# under a short lease takes it in time; a topic the workers empty within a count (a
# second) raises its rate, and so its cap, at once.
FLOOR_TICKETS = 100
# Each count moves the estimate this far towards the rate it measured.
RATE_WEIGHT = 0.3

Topic = tuple[str, str]  # (priority, channel)


@dataclass
class Pacing:
    lease_seconds: float
    max_queued: int
    # What a topic may hold before its drain rate is known (and at the least).
    floor: int
    rates: dict[Topic, float] = field(default_factory=dict)
    _last: dict[Topic, int] | None = None

    def observe(self, counts: dict[Topic, Count], seconds: float) -> None:
        """A count ``seconds`` after the previous one: each topic's drain rate updated.
        The first count only sets the start (rows queued before it are not fresh)."""
        if self._last is None or seconds <= 0:
            self._last = {topic: count.queued for topic, count in counts.items()}
            return
        for topic in set(counts) | set(self._last):
            count = counts.get(topic, Count(0, 0))
            before = self._last.get(topic, 0)
            if before == 0 and count.fresh == 0:
                continue  # nothing to drain: says nothing of how fast it drains
            drained = max(0, before + count.fresh - count.queued)
            rate = drained / seconds
            known = self.rates.get(topic)
            if known is None:
                self.rates[topic] = rate
            elif count.queued == 0:
                # The topic ran dry: the workers could have taken more than this.
                self.rates[topic] = max(known, rate)
            else:
                self.rates[topic] = known + RATE_WEIGHT * (rate - known)
        self._last = {topic: count.queued for topic, count in counts.items()}

    def cap(self, topic: Topic) -> int:
        """How many QUEUED rows ``topic`` may hold now."""
        rate = self.rates.get(topic)
        paced = 0 if rate is None else int(rate * self.lease_seconds * LEASE_FILL)
        return min(self.max_queued, max(self.floor, paced))

    def snapshot(self) -> dict[str, dict[str, float]]:
        """Per topic its drain rate (per second) and cap, for the logs and the benchmarks."""
        return {
            ".".join(topic): {"drainPerSecond": round(rate, 2), "cap": self.cap(topic)}
            for topic, rate in sorted(self.rates.items())
        }
