"""Where a HIGH email's time goes: ``python -m bench.kafka_trace <tidings command>`` runs
that command with timers around the relay's claim and publish, the worker's fetch and claim,
the direct lane's claim and the SendGrid call (HIGH deliveries only), each step's time
appended as ``step delivery-id unix-time`` to ``$BENCH_KAFKA_TRACE.<pid>``. The wrappers only
note the time; what they wrap runs unchanged. ``steps`` turns the files, the 202 times and
the simulator's receipts into per-step medians.

Used by ``python -m bench.kafka --trace``, for one more run per mode (not the timed ones).
"""

from __future__ import annotations

import glob
import math
import os
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, TextIO

from tidings.priorities import Priority

ENV = "BENCH_KAFKA_TRACE"
# (from, to, what) in the order a HIGH email goes through them.
KAFKA_STEPS = [
    ("accept", "r_called", "202 -> the relay's HIGH claim starts (NOTIFY at commit)"),
    ("r_called", "r_rows", "relay: `SELECT ... FOR UPDATE SKIP LOCKED`"),
    ("r_rows", "r_acked", "relay: publish until the broker's ack (`acks=all`)"),
    ("r_acked", "r_committed", "relay: `UPDATE ... QUEUED` and commit"),
    ("r_committed", "w_fetched", "broker -> worker: the ticket fetched"),
    ("w_fetched", "w_claim_start", "worker: fetched -> its claim starts"),
    ("w_claim_start", "w_claimed", "worker: claim QUEUED -> SENDING (its transaction)"),
    ("w_claimed", "p_send", "worker: send-time checks, render, rate token -> provider call"),
    ("p_send", "recv", "provider call -> simulator's receipt"),
]
DIRECT_STEPS = [
    ("accept", "d_claim_start", "202 -> the HIGH lane's claim starts (NOTIFY at commit)"),
    ("d_claim_start", "d_claimed", "lane: claim PENDING -> SENDING (one statement)"),
    ("d_claimed", "p_send", "lane: send-time checks, render, rate token -> provider call"),
    ("p_send", "recv", "provider call -> simulator's receipt"),
]


class _Marks:
    def __init__(self, out: TextIO) -> None:
        self.out = out

    def __call__(self, step: str, ids: Iterable[Any], at: float | None = None) -> None:
        at = time.time() if at is None else at
        self.out.write("".join(f"{step} {i} {at:.6f}\n" for i in ids))


Mark = Callable[..., None]
Wrapped = Callable[..., Awaitable[Any]]


def install(mark: Mark) -> None:
    """Wrap the relay's, the worker's, the direct lane's and SendGrid's steps."""
    import tidings.background.relay as relay
    import tidings.dispatch.lanes.direct as lane
    import tidings.dispatch.lanes.kafka as kafka_lane
    from tidings.providers.sendgrid import SendGridProvider

    _swap(relay, "relay_due", lambda original: _relay_due(original, mark))
    _swap(kafka_lane.KafkaLane, "_take", lambda original: _take(original, mark))
    _swap(kafka_lane, "claim_queued", lambda original: _claim_queued(original, mark))
    _swap(lane, "claim_due", lambda original: _claim_due(original, mark))
    _swap(SendGridProvider, "send", lambda original: _send(original, mark))


def _swap(owner: object, name: str, wrap: Callable[[Wrapped], Wrapped]) -> None:
    """``owner.name`` replaced by ``wrap(owner.name)``."""
    setattr(owner, name, wrap(getattr(owner, name)))


def _relay_due(relay_due: Wrapped, mark: Mark) -> Wrapped:
    async def traced(db: Any, priority: Priority, *args: Any) -> Any:
        if priority != Priority.HIGH:
            return await relay_due(db, priority, *args)
        limit, now, queued_until, publish, *rest = args
        called = time.time()
        ids: list[uuid.UUID] = []

        async def published(due: Any, until: Any) -> None:
            ids.extend(d.id for d in due)
            mark("r_rows", ids)
            await publish(due, until)
            mark("r_acked", ids)

        count = await relay_due(db, priority, limit, now, queued_until, published, *rest)
        mark("r_called", ids, called)
        mark("r_committed", ids)
        return count

    return traced


def _take(take: Wrapped, mark: Mark) -> Wrapped:
    from tidings.transport.tickets import Ticket

    async def traced(self: Any, consumer: Any, records: Any) -> Any:
        if self.priority == Priority.HIGH:
            tickets = [Ticket.decode(m.value) for batch in records.values() for m in batch]
            mark("w_fetched", [t.delivery_id for t in tickets if t is not None])
        return await take(self, consumer, records)

    return traced


def _claim_queued(claim_queued: Wrapped, mark: Mark) -> Wrapped:
    async def traced(db: Any, tickets: Any, *args: Any) -> Any:
        started = time.time()
        claimed = await claim_queued(db, tickets, *args)
        high = [c.id for c in claimed if c.priority == Priority.HIGH.value]
        mark("w_claim_start", high, started)
        mark("w_claimed", high)
        taken = {c.id for c in claimed}
        mark("w_dropped", [t[0] for t in tickets if t[0] not in taken])
        return claimed

    return traced


def _claim_due(claim_due: Wrapped, mark: Mark) -> Wrapped:
    async def traced(db: Any, priority: Priority, *args: Any) -> Any:
        started = time.time()
        claimed = await claim_due(db, priority, *args)
        if priority == Priority.HIGH:
            mark("d_claim_start", [c.id for c in claimed], started)
            mark("d_claimed", [c.id for c in claimed])
        return claimed

    return traced


def _send(send: Wrapped, mark: Mark) -> Wrapped:
    async def traced(self: Any, message: Any) -> Any:
        if message.priority == Priority.HIGH:
            mark("p_send", [message.delivery_id])
        return await send(self, message)

    return traced


def _read(prefix: str) -> dict[uuid.UUID, dict[str, float]]:
    """Each delivery's first time of each step, from every process's file."""
    times: dict[uuid.UUID, dict[str, float]] = {}
    for path in glob.glob(f"{prefix}.*"):
        with open(path) as lines:
            for line in lines:
                step, delivery_id, at = line.split()
                times.setdefault(uuid.UUID(delivery_id), {}).setdefault(step, float(at))
    return times


def steps(
    prefix: str, mode: str, accepted: Mapping[uuid.UUID, float], received: Mapping[uuid.UUID, float]
) -> list[tuple[str, float, int]]:
    """(step, median seconds, HIGH counted) for each step of ``mode``; ``accepted`` and
    ``received``: the 202's and the simulator's times by delivery id."""
    times = _read(prefix)
    found = []
    for start, end, what in KAFKA_STEPS if mode == "kafka" else DIRECT_STEPS:
        spans = []
        for delivery_id, at in accepted.items():
            mine = times.get(delivery_id, {}) | {"accept": at}
            if delivery_id in received:
                mine["recv"] = received[delivery_id]
            if start in mine and end in mine:
                spans.append(mine[end] - mine[start])
        found.append((what, statistics.median(spans) if spans else float("nan"), len(spans)))
    return found


def early_tickets(prefix: str, ids: Iterable[uuid.UUID]) -> tuple[int, int]:
    """Of the HIGH ``ids``: how many tickets the worker fetched before the relay had
    committed their rows QUEUED, and how many of those its claim dropped (the row was not
    QUEUED yet), leaving the row QUEUED with no ticket until the queue lease runs out."""
    times = _read(prefix)
    early = [
        t
        for t in (times.get(i, {}) for i in ids)
        if "w_fetched" in t and "r_committed" in t and t["w_fetched"] < t["r_committed"]
    ]
    dropped = [t for t in early if t.get("w_dropped", math.inf) < t.get("w_claimed", math.inf)]
    return len(early), len(dropped)


def main() -> None:
    with open(f"{os.environ[ENV]}.{os.getpid()}", "a", buffering=1) as out:
        install(_Marks(out))
        from tidings.cli.app import app

        sys.argv = ["tidings", *sys.argv[1:]]
        app()


if __name__ == "__main__":
    main()
