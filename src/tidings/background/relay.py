"""The relay (``tidings relay``): the transactional outbox between the database and Kafka.

One loop per priority claims due PENDING deliveries (``FOR UPDATE SKIP LOCKED``, so several
relays share the work), publishes a ticket for each to ``tidings.<priority>.<channel>``
keyed by user, waits for the broker's acknowledgement (``acks=all``) and only then marks
them QUEUED under a queue lease, in the same transaction (store/queue.relay_due). HIGH is
woken at once by the intake's NOTIFY. A topic that holds ``kafka.max_queued`` deliveries
gets no more until the workers take some, and no more than they drain in half a queue
lease (transport/pacing.py), so a backlog waits in the database, not in a queue lease it
could outlive.

The relay also expands campaigns and runs the reaper: SENDING rows of dead workers and
QUEUED rows whose ticket was lost (a broker restarted without its log) go back to PENDING.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import random
import socket
from collections.abc import Sequence
from datetime import datetime, timedelta

from aiokafka import AIOKafkaProducer

from tidings.background.reaping import reap_every
from tidings.campaigns.expander import Expander
from tidings.clock import utcnow
from tidings.dispatch.pipeline.sending import error_name
from tidings.ids import new_id
from tidings.priorities import Channel, Priority
from tidings.service import Service
from tidings.store.queue import Due, queued_counts, relay_due
from tidings.store.wakeup import listen_postgres
from tidings.transport.pacing import FLOOR_TICKETS, Pacing
from tidings.transport.settings import KafkaSettings
from tidings.transport.tickets import Ticket, partition_key
from tidings.transport.topics import all_topics, ensure_topics, topic_name
from tidings.waiting import first_of, sleep_unless

log = logging.getLogger(__name__)

# How often the relay counts what each topic holds.
COUNT_INTERVAL = 1.0
# How long a publish may wait for the broker's acknowledgement.
PUBLISH_TIMEOUT = 15.0
# Between attempts while the broker or the database is away.
RETRY_SECONDS = 1.0


class Relay:
    def __init__(self, service: Service, rng: random.Random | None = None) -> None:
        settings = service.settings
        if settings.kafka_bootstrap is None:
            raise ValueError("the relay needs kafka_bootstrap (TIDINGS_KAFKA_BOOTSTRAP)")
        self.service = service
        self.bootstrap = settings.kafka_bootstrap
        self.kafka: KafkaSettings = settings.kafka
        self.id = f"relay:{socket.gethostname()}:{os.getpid()}:{new_id().hex[-8:]}"
        self.expander = Expander(
            service.db,
            service.types,
            service.wakeup,
            settings.campaigns,
            self.id,
            rng or random.Random(),
        )
        self.queued: dict[tuple[str, str], int] = {}
        kafka = self.kafka
        floor = min(FLOOR_TICKETS, kafka.relay_batch, kafka.max_queued)
        self.pacing = Pacing(kafka.queue_lease_seconds, kafka.max_queued, floor)
        self.published = 0  # since start, for the logs and the benchmarks
        self._producer: AIOKafkaProducer | None = None
        self._starting = asyncio.Lock()  # the priorities' loops share one producer

    async def run(self, stop: asyncio.Event) -> None:
        helpers = [
            asyncio.create_task(self._count(stop)),
            asyncio.create_task(self._reap_every(stop)),
            asyncio.create_task(self.expander.run(stop)),
            asyncio.create_task(listen_postgres(self.service.db, self.service.wakeup, stop)),
        ]
        try:
            await asyncio.gather(*(self._relay(priority, stop) for priority in Priority))
        finally:
            _, late = await asyncio.wait(helpers, timeout=5.0)
            for helper in late:
                helper.cancel()
            await asyncio.gather(*helpers, return_exceptions=True)
            if self._producer is not None:
                await self._producer.stop()

    async def _relay(self, priority: Priority, stop: asyncio.Event) -> None:
        """Publish ``priority``'s due deliveries until ``stop``."""
        lane = self.service.settings.lanes.for_priority(priority)
        while not stop.is_set():
            try:
                full = await self._step(priority)
            except Exception as error:
                log.warning("relay %s: publishing failed (%s)", priority, error_name(error))
                await self._recover()
                await sleep_unless(stop, RETRY_SECONDS)
                continue
            if not full:
                await first_of(self.service.wakeup.wait(priority, lane.poll_interval), stop.wait())

    async def _step(self, priority: Priority) -> bool:
        """One batch; True when it was full (more may be due at once)."""
        rooms = self._rooms(priority)
        if not rooms:
            return False
        open_channels = list(rooms)
        now = utcnow()
        queued_until = now + timedelta(seconds=self.kafka.queue_lease_seconds)
        channels = None if len(open_channels) == len(Channel) else open_channels
        publish = functools.partial(self._publish, priority)
        batch = min(self.kafka.relay_batch, max(rooms.values()))
        count = await relay_due(
            self.service.db, priority, batch, now, queued_until, publish, channels
        )
        return count == batch

    def _rooms(self, priority: Priority) -> dict[str, int]:
        """The channels whose topic of ``priority`` has room, and how much: fewer QUEUED
        than its workers drain in half a queue lease, and than ``kafka.max_queued``
        (transport/pacing.py)."""
        found = {}
        for channel in Channel:
            topic = (priority.value, channel.value)
            cap = self.pacing.cap(topic) if self.kafka.paced else self.kafka.max_queued
            room = cap - self.queued.get(topic, 0)
            if room > 0:
                found[channel.value] = room
        return found

    async def _publish(
        self, priority: Priority, due: Sequence[Due], queued_until: datetime
    ) -> None:
        """Send every ticket and wait until the broker has acknowledged them all."""
        producer = await self.producer()
        sent = []
        for delivery in due:
            ticket = Ticket(delivery.id, queued_until)
            sent.append(
                await producer.send(
                    topic_name(priority, delivery.channel),
                    value=ticket.encode(),
                    key=partition_key(delivery.user_id, delivery.id),
                )
            )
        async with asyncio.timeout(PUBLISH_TIMEOUT):
            await asyncio.gather(*sent)
        for delivery in due:
            key = (priority.value, delivery.channel)
            self.queued[key] = self.queued.get(key, 0) + 1
        self.published += len(due)

    async def producer(self) -> AIOKafkaProducer:
        async with self._starting:
            return await self._start_producer()

    async def _start_producer(self) -> AIOKafkaProducer:
        if self._producer is None:
            await ensure_topics(self.bootstrap, self.kafka, all_topics())
            producer = AIOKafkaProducer(
                bootstrap_servers=self.bootstrap,
                client_id=f"{self.kafka.client_id}-relay",
                acks="all",
                # Not the idempotent producer: a duplicate ticket is harmless (it finds no
                # QUEUED row under its lease), and not every broker implements it.
                enable_idempotence=False,
                linger_ms=self.kafka.linger_ms,
                request_timeout_ms=int(PUBLISH_TIMEOUT * 1000),
                metadata_max_age_ms=5_000,
            )
            try:
                await producer.start()
            except BaseException:
                await producer.stop()
                raise
            self._producer = producer
        return self._producer

    async def _recover(self) -> None:
        """After a failed publish: a broker that restarted without its log lacks the
        topics; create them again. A producer that cannot even start is built anew."""
        try:
            await ensure_topics(self.bootstrap, self.kafka, all_topics())
        except Exception as error:
            log.warning("relay: broker unreachable (%s)", error_name(error))
            if self._producer is not None:
                producer, self._producer = self._producer, None
                try:
                    await producer.stop()
                except Exception as stop_error:
                    log.debug("stopping the producer failed (%s)", error_name(stop_error))

    async def _count(self, stop: asyncio.Event) -> None:
        """What each topic holds, and from it how fast its workers drain it."""
        since = utcnow()
        while not stop.is_set():
            at = utcnow()
            try:
                counts = await queued_counts(self.service.db, since)
            except Exception as error:
                log.warning("relay: counting queued deliveries failed (%s)", error_name(error))
            else:
                self.queued = {topic: count.queued for topic, count in counts.items()}
                self.pacing.observe(counts, (at - since).total_seconds())
                since = at
            await sleep_unless(stop, COUNT_INTERVAL)

    async def _reap_every(self, stop: asyncio.Event) -> None:
        service = self.service
        await reap_every(service.settings.reaper_interval, service.db, service.wakeup, stop)
