"""A Kafka worker's lane: consumes its priority's topics and sends what it claims.

A lane reads the partitions it computes itself from the live workers of its priority
(transport/assignment.py): no broker-side consumer group decides, so a group the broker
keeps broken (members and no partition, as tansu did) cannot stall it. Offsets are still
committed at the broker, under a group no consumer joins (``tidings.<priority>.offsets``).
Each topic has the lane's concurrency to itself, and a topic whose account has no tokens
(or whose slots are all busy) is paused rather than read, so that nothing is claimed only
to be put back. Per batch of messages: the tickets are claimed QUEUED -> SENDING in one
statement (a ticket whose row is no longer QUEUED under its lease is a duplicate, dropped),
then the shared pipeline (dispatch/pipeline/sending.py) checks and sends exactly as the direct lanes
do. A message's offset is committed only once its delivery's outcome is written
(transport/offsets.py): a worker that dies loses nothing, and the messages it had read come
back to whoever takes its partitions, and find their rows taken.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition

from tidings.clock import utcnow
from tidings.dispatch.lanes.progress import LaneProgress, LaneWatch
from tidings.dispatch.lanes.settings import LaneSettings
from tidings.dispatch.pipeline.sending import LaneContext, SendPipeline, error_name, error_where
from tidings.priorities import Channel, Priority
from tidings.store import provider_state
from tidings.store.claims import ClaimedDelivery
from tidings.store.queue import claim_queued, has_queued
from tidings.transport.assignment import partitions_of
from tidings.transport.offsets import OffsetTracker
from tidings.transport.settings import KafkaSettings
from tidings.transport.tickets import Ticket
from tidings.transport.topics import ensure_topics, group_id, topic_name
from tidings.waiting import first_of, sleep_unless

log = logging.getLogger(__name__)

# How long a commit waits for the outcomes it covers before giving up until the next one.
COMMIT_WAIT_SECONDS = 10.0
# Between attempts to reach a broker that is down.
RECONNECT_SECONDS = 1.0
# How often an idle lane checks that its positions are still inside the partitions' logs.
TRUNCATION_CHECK_SECONDS = 5.0
# Bounds on the broker calls of a session's end and of a partition handed to another
# worker; a consumer that cannot stop is abandoned.
REVOKE_COMMIT_SECONDS = 3.0
END_COMMIT_SECONDS = 3.0
CONSUMER_STOP_SECONDS = 5.0
# How often a lane computes its partitions again (from the workers' reports, every 2 s).
ASSIGN_SECONDS = 2.0
# How long the consume loop gets to see that its session ends before it is cancelled.
STEP_SETTLE_SECONDS = 2.0


@dataclass(frozen=True)
class WorkerPlan:
    """What a ``tidings worker`` consumes: its lanes and channels, and where."""

    bootstrap: str
    kafka: KafkaSettings
    priorities: Sequence[Priority] = tuple(Priority)
    channels: Sequence[Channel] = tuple(Channel)


@dataclass(frozen=True)
class _Read:
    """A message of a batch: where it came from, and its ticket (None: not a ticket)."""

    partition: TopicPartition
    offset: int
    ticket: Ticket | None


class KafkaLane:
    def __init__(
        self,
        priority: Priority,
        settings: LaneSettings,
        context: LaneContext,
        plan: WorkerPlan,
        grace: float = 10.0,
        member: str = "",
    ) -> None:
        self.priority = priority
        # This worker among the lane's readers: its dispatcher's id, as it reports it.
        self.member = member or f"{plan.kafka.client_id}-{id(self):x}"
        self.grace = grace
        self.settings = settings
        self.context = context
        self.plan = plan
        self.pipeline = SendPipeline(priority, context)
        self.topics = {topic_name(priority, c): Channel(c).value for c in plan.channels}
        self.offsets = OffsetTracker()
        self._checked_at = 0.0
        self._assigned_at: float | None = None
        # The next offset to read of each partition read so far (kept across a new
        # assignment, which would otherwise restart every partition from its commit).
        self._next: dict[TopicPartition, int] = {}
        self._readers: dict[str, list[str]] = {}
        self.progress = self.pipeline.progress = LaneProgress(priority.value, "kafka")
        self.progress.channels = tuple(self.topics.values())
        self.watch = LaneWatch(
            self.progress,
            settings.stall_seconds,
            self._has_work,
            self._reset,
            # A session's end drains its sends, commits and stops its consumer, each bounded.
            settle=grace + STEP_SETTLE_SECONDS + END_COMMIT_SECONDS + CONSUMER_STOP_SECONDS,
            # A restarted lane reads its partitions again after a report or two.
            min_restart_seconds=provider_state.LIVE_SECONDS + 2 * ASSIGN_SECONDS + 10,
        )

    @property
    def in_flight(self) -> int:
        return self.pipeline.in_flight

    async def run(self, stop: asyncio.Event) -> None:
        """Consume until ``stop``; a broker that is down is waited for, never fatal; a
        stalled lane gets a new consumer (dispatch/lanes/progress.py)."""
        await self.watch.supervise(self._session, stop)

    async def _session(self, end: asyncio.Event) -> None:
        """One consumer's life: reading the lane's partitions until ``end``."""
        while not end.is_set():
            consumer = self._consumer()
            try:
                # Created here too, so that no broker makes them with its own defaults.
                await ensure_topics(self.plan.bootstrap, self.plan.kafka, list(self.topics))
                await consumer.start()
            except Exception as error:
                log.warning("%s lane: broker unreachable (%s)", self.priority, error_name(error))
                await _stop_quietly(consumer)
                await sleep_unless(end, RECONNECT_SECONDS)
                continue
            except BaseException:  # cancelled while joining: leave nothing running
                await _stop_quietly(consumer)
                raise
            try:
                await self._consume_until(consumer, end)
            finally:
                await self.pipeline.drain(self.grace)
                await self.commit(consumer, wait=END_COMMIT_SECONDS)
                self.offsets = OffsetTracker()  # the next consumer starts from the commits
                self._next, self._assigned_at = {}, None
                self.progress.assigned = 0
                await _stop_quietly(consumer)
            return

    async def _consume_until(self, consumer: AIOKafkaConsumer, end: asyncio.Event) -> None:
        """Consume until ``end``; a step that does not see it (a hung await) is cancelled."""
        consuming = asyncio.ensure_future(self._consume(consumer, end))
        ending = asyncio.ensure_future(end.wait())
        try:
            await asyncio.wait([consuming, ending], return_when=asyncio.FIRST_COMPLETED)
            if not consuming.done():
                await asyncio.wait([consuming], timeout=STEP_SETTLE_SECONDS)
            if not consuming.done():
                log.warning("%s lane: a step did not end; cancelled", self.priority)
                consuming.cancel()
            await asyncio.gather(consuming, return_exceptions=True)
        finally:
            ending.cancel()

    async def _has_work(self) -> bool:
        """Published deliveries wait for this lane, or its sends do not end."""
        return self.pipeline.in_flight > 0 or await has_queued(self.context.db, self.priority)

    async def _reset(self) -> None:
        """After a stall: forget this lane's token estimates (a limiter's state that may
        be stale, e.g. after Redis lost its own)."""
        self.context.protection.forget_estimates(self.priority)

    def _consumer(self) -> AIOKafkaConsumer:
        kafka = self.plan.kafka
        return AIOKafkaConsumer(
            bootstrap_servers=self.plan.bootstrap,
            group_id=group_id(self.priority),
            client_id=f"{kafka.client_id}-worker",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=kafka.fetch_wait_ms,
            # Topics a restarted broker lost, and created again by a relay, are found soon.
            metadata_max_age_ms=5_000,
        )

    async def _reassign(self, consumer: AIOKafkaConsumer) -> None:
        """Every ``ASSIGN_SECONDS``: read the partitions that are this worker's now."""
        now = asyncio.get_running_loop().time()
        if self._assigned_at is not None and now - self._assigned_at < ASSIGN_SECONDS:
            return
        self._assigned_at = now
        try:
            async with asyncio.timeout(ASSIGN_SECONDS * 2):
                self._readers = await self._live_readers()
        except Exception as error:
            # The database is away: the last readers known (none at first: all is ours).
            log.info("%s lane: live workers not known (%s)", self.priority, error_name(error))
        try:
            async with asyncio.timeout(ASSIGN_SECONDS * 2):
                await consumer.topics()  # the partitions of every topic, fresh
        except Exception as error:
            log.info("%s lane: partitions not known (%s)", self.priority, error_name(error))
            return
        partitions = {t: consumer.partitions_for_topic(t) or set() for t in self.topics}
        wanted = {
            TopicPartition(t, p) for t, p in partitions_of(self.member, self._readers, partitions)
        }
        await self._take_partitions(consumer, wanted)

    async def _live_readers(self) -> dict[str, list[str]]:
        """Each of the lane's topics, and the live workers that report reading it (a
        worker silent for ``provider_state.LIVE_SECONDS`` is gone: its partitions go to
        the others)."""
        since = provider_state.live_since(utcnow())
        lanes_of: dict[str, list[dict[str, Any]]] = {}
        for report in await provider_state.reports(self.context.db, since):
            # Every account's report carries its dispatcher's lanes (its progress).
            lanes_of[report.dispatcher] = list(report.state.get("lanes") or [])
        readers: dict[str, list[str]] = {}
        for member, lanes in lanes_of.items():
            for lane in lanes:
                if lane.get("transport") != "kafka" or lane.get("priority") != self.priority.value:
                    continue
                channels = lane.get("channels") or list(self.topics.values())
                for topic in self.topics:
                    if self.topics[topic] in channels:
                        readers.setdefault(topic, []).append(member)
        return readers

    async def _take_partitions(
        self, consumer: AIOKafkaConsumer, wanted: set[TopicPartition]
    ) -> None:
        """Read ``wanted`` from now on; what is done of the partitions let go is committed
        first, and the partitions kept are read on from where they were."""
        current = consumer.assignment()
        if wanted == current:
            return
        gone = current - wanted
        if gone:
            await self.commit(consumer, gone, wait=REVOKE_COMMIT_SECONDS)
            self.offsets.forget(gone)
        kept = {p: self._next[p] for p in current & wanted if p in self._next}
        self._next = dict(kept)
        consumer.assign(sorted(wanted))
        for partition, offset in kept.items():
            consumer.seek(partition, offset)
        log.info("%s lane: reads %d partitions (%d let go)", self.priority, len(wanted), len(gone))

    async def _consume(self, consumer: AIOKafkaConsumer, stop: asyncio.Event) -> None:
        committer = asyncio.create_task(self._commit_every(consumer, stop))
        try:
            while not stop.is_set():
                try:
                    await self._step(consumer, stop)
                except Exception as error:
                    lane = self.priority.value
                    log.error(
                        "%s lane: step failed (%s)\n%s", lane, error_name(error), error_where(error)
                    )
                    await sleep_unless(stop, self.settings.poll_interval)
        finally:
            committer.cancel()
            await asyncio.gather(committer, return_exceptions=True)

    async def _step(self, consumer: AIOKafkaConsumer, stop: asyncio.Event) -> None:
        """Read what the topics have slots and tokens for; pause the others."""
        await self._reassign(consumer)
        assignment = consumer.assignment()
        self.progress.assigned = len(assignment)
        partitions = _by_topic(assignment)
        budgets: dict[str, int] = {}
        for topic, channel in self.topics.items():
            parts = partitions.get(topic)
            if not parts:
                continue
            budget = self._budget(channel)
            if budget > 0:
                consumer.resume(*parts)
                budgets[topic] = budget
            else:
                consumer.pause(*parts)
        if not budgets:
            await self._wait_for_room(stop, bool(partitions))
            return
        records: dict[TopicPartition, list[Any]] = {}
        for topic, budget in budgets.items():
            records.update(await consumer.getmany(*partitions[topic], max_records=budget))
        if not records:
            ready = [p for topic in budgets for p in partitions[topic]]
            records = await consumer.getmany(
                *ready, timeout_ms=self.plan.kafka.fetch_wait_ms, max_records=min(budgets.values())
            )
            if not records:
                await self._restart_truncated(consumer, ready)
        if records:
            await self._take(consumer, records)

    async def _restart_truncated(
        self, consumer: AIOKafkaConsumer, partitions: list[TopicPartition]
    ) -> None:
        """Read from the start a partition whose log ends before this lane's position.

        A broker that lost its log (a restart without storage, a topic made again) may still
        be handed the old offsets, by this lane's own commits or a previous owner's. Kafka
        answers a fetch past the log's end with OFFSET_OUT_OF_RANGE and aiokafka resets to
        ``earliest``; a broker that answers with nothing instead (tansu) would leave the
        partition unread until it grew past that offset. Everything in such a log is newer
        than the position, so reading it from its start is the same reset, done here.
        """
        now = asyncio.get_running_loop().time()
        if now - self._checked_at < TRUNCATION_CHECK_SECONDS:
            return
        self._checked_at = now
        try:
            # aiokafka's position() waits, without end, for a partition whose offset reset
            # never succeeds (a broker that lost the topic): the lane stood still, deaf
            # even to its stop. Bounded, the check is tried again at the next idle step.
            async with asyncio.timeout(TRUNCATION_CHECK_SECONDS):
                await self._seek_truncated(consumer, partitions)
        except TimeoutError:
            log.warning("%s lane: positions unknown (a reset under way)", self.priority)

    async def _seek_truncated(
        self, consumer: AIOKafkaConsumer, partitions: list[TopicPartition]
    ) -> None:
        assigned = consumer.assignment()
        for partition in partitions:
            if partition not in assigned:  # revoked meanwhile (a rebalance during the fetch)
                continue
            end = consumer.highwater(partition)
            if end is None or await consumer.position(partition) <= end:
                continue
            log.warning(
                "%s lane: %s ends before our position; reading it from its start",
                self.priority,
                partition,
            )
            self.offsets.forget([partition])
            self._next.pop(partition, None)
            await consumer.seek_to_beginning(partition)

    def _budget(self, channel: str) -> int:
        free = self.settings.concurrency - self.pipeline.in_flight_of(channel)
        wanted = min(free, self.settings.claim_batch)
        if wanted <= 0:
            return 0
        return self.context.protection.channel_budget(self.priority, channel, wanted)

    async def _wait_for_room(self, stop: asyncio.Event, assigned: bool) -> None:
        """Nothing may be read now: wait for a free slot, for tokens, or for partitions."""
        if not assigned:
            await sleep_unless(stop, self.settings.poll_interval)
            return
        pause = self.context.protection.budget_pause(self.priority)
        within = min(max(pause, 0.005), self.settings.poll_interval)
        freed = self.pipeline.slot_freed
        freed.clear()
        await first_of(freed.wait(), stop.wait(), asyncio.sleep(within))

    async def _take(
        self, consumer: AIOKafkaConsumer, records: dict[TopicPartition, list[Any]]
    ) -> None:
        """Claim the batch's tickets and start their sends."""
        reads = [
            _Read(partition, message.offset, Ticket.decode(message.value))
            for partition, messages in records.items()
            for message in messages
        ]
        for read in reads:
            self.offsets.started(read.partition, read.offset)
            self._next[read.partition] = read.offset + 1
        self.progress.read(len(reads))
        tickets = [r.ticket for r in reads if r.ticket is not None]
        now = utcnow()
        lease_until = now + timedelta(seconds=self.context.lease_seconds)
        try:
            claimed = await claim_queued(
                self.context.db,
                [(t.delivery_id, t.queued_until) for t in tickets],
                now,
                lease_until,
            )
        except Exception as error:
            # Nothing was taken (or, if the commit went through unseen, the rows are leased
            # and the reaper returns them): read the batch again after the poll interval.
            log.warning(
                "%s lane: claim failed (%s); reading again", self.priority, error_name(error)
            )
            self._rewind(consumer, reads)
            await asyncio.sleep(self.settings.poll_interval)
            return
        self.progress.claimed(len(claimed))
        await self._send(claimed, reads)

    async def _send(self, claimed: list[ClaimedDelivery], reads: list[_Read]) -> None:
        where: dict[Any, list[_Read]] = {}
        for read in reads:
            if read.ticket is None:
                log.warning("%s lane: a message that is not a ticket was dropped", self.priority)
            where.setdefault(read.ticket.delivery_id if read.ticket else None, []).append(read)
        started: list[tuple[ClaimedDelivery, asyncio.Task[None]]] = []
        try:
            started = await self.pipeline.process(claimed)
        except Exception as error:
            # The claimed rows are leased: the reaper returns them if nothing else does.
            log.error("%s lane: sending a batch failed (%s)", self.priority, error_name(error))
        running = {delivery.id for delivery, _ in started}
        for delivery, task in started:
            task.add_done_callback(self._when_sent(where.get(delivery.id, [])))
        # Every other message is done now: a duplicate, or its outcome is with the writer.
        for delivery_id, mine in where.items():
            if delivery_id not in running:
                self._done(mine)

    def _when_sent(self, reads: list[_Read]) -> Callable[[asyncio.Task[None]], None]:
        return lambda _task: self._done(reads)

    def _done(self, reads: list[_Read]) -> None:
        for read in reads:
            self.offsets.done(read.partition, read.offset)

    def _rewind(self, consumer: AIOKafkaConsumer, reads: list[_Read]) -> None:
        first: dict[TopicPartition, int] = {}
        for read in reads:
            first[read.partition] = min(read.offset, first.get(read.partition, read.offset))
        for partition, offset in first.items():
            self.offsets.rewind(partition, offset)
            self._next[partition] = offset
            consumer.seek(partition, offset)

    async def _commit_every(self, consumer: AIOKafkaConsumer, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await sleep_unless(stop, self.plan.kafka.commit_interval)
            await self.commit(consumer)

    async def commit(
        self,
        consumer: AIOKafkaConsumer,
        only: set[TopicPartition] | None = None,
        wait: float = COMMIT_WAIT_SECONDS,
    ) -> None:
        """Commit the offsets whose outcomes are written; a failure waits for the next."""
        offsets = self.offsets.committable()
        if only is not None:
            offsets = {p: o for p, o in offsets.items() if p in only}
        if not offsets:
            return
        try:
            async with asyncio.timeout(wait):
                await self.context.writer.written(self.context.writer.mark())
                await consumer.commit(offsets)
        except Exception as error:
            log.info("%s lane: offsets not committed (%s)", self.priority, error_name(error))
            return
        self.offsets.committed(offsets)

    async def drain(self, grace: float) -> None:
        await self.pipeline.drain(grace)


def _by_topic(partitions: set[TopicPartition]) -> dict[str, list[TopicPartition]]:
    found: dict[str, list[TopicPartition]] = {}
    for partition in sorted(partitions):
        found.setdefault(partition.topic, []).append(partition)
    return found


async def _stop_quietly(consumer: AIOKafkaConsumer) -> None:
    try:
        async with asyncio.timeout(CONSUMER_STOP_SECONDS):
            await consumer.stop()
    except Exception as error:
        log.debug("stopping a consumer failed (%s)", error_name(error))
