"""The Kafka transport in one process, against a real broker (tansu): the relay publishes
due deliveries and marks them QUEUED, workers claim them by ticket and send through the
same pipeline as the direct dispatcher; duplicate and stale tickets are dropped, retries
come back through the relay, and QUEUED rows whose ticket was lost are reaped."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from datetime import datetime, timedelta
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from tests.helpers import eventually, put_type
from tests.kafka_broker import Broker
from tidings.assembly import assemble_dispatcher
from tidings.background.relay import Relay
from tidings.clock import utcnow
from tidings.dispatch.lanes.kafka import WorkerPlan
from tidings.priorities import Channel, Priority
from tidings.providers.testing import Script, ScriptedProvider
from tidings.service import Service
from tidings.settings import Settings
from tidings.states import Status
from tidings.store.claims import ClaimedDelivery, reap_expired_leases
from tidings.store.queue import Due, claim_queued, relay_due
from tidings.store.schema import delivery, delivery_event
from tidings.transport.offsets import OffsetTracker
from tidings.transport.settings import KafkaSettings
from tidings.transport.tickets import Ticket
from tidings.transport.topics import ensure_topics, group_id, topic_name

ON_POSTGRES = pytest.mark.parametrize("backend", ["postgresql"], indirect=True)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    broker = Broker(tmp_path_factory.mktemp("tansu") / "tansu.log").start()
    yield broker
    broker.stop()


@pytest.fixture
def settings(settings: Settings, broker: Broker) -> Settings:
    kafka = KafkaSettings(partitions=2, queue_lease_seconds=30, commit_interval=0.1)
    return settings.model_copy(
        update={"transport": "kafka", "kafka_bootstrap": broker.bootstrap, "kafka": kafka}
    )


@contextlib.asynccontextmanager
async def running(
    service: Service, provider: ScriptedProvider, relays: int = 1, workers: int = 1
) -> AsyncIterator[list[Relay]]:
    """Relays and workers in this process, stopped on exit."""
    stop = asyncio.Event()
    assert service.settings.kafka_bootstrap
    plan = WorkerPlan(service.settings.kafka_bootstrap, service.settings.kafka)
    started = [Relay(service) for _ in range(relays)]
    jobs = [relay.run(stop) for relay in started]
    for _ in range(workers):
        providers = {channel: provider for channel in Channel}
        jobs.append(assemble_dispatcher(service, providers, worker=plan).run(stop))
    tasks = [asyncio.create_task(job) for job in jobs]
    try:
        yield started
    finally:
        stop.set()
        await asyncio.wait_for(asyncio.gather(*tasks), timeout=60)


async def accept(client: httpx.AsyncClient, count: int, kind: str = "otp") -> list[str]:
    batch = [
        {"idempotencyKey": str(uuid.uuid4()), "type": kind, "to": {"email": f"u{n}@example.com"}}
        for n in range(count)
    ]
    answer = await client.post("/v1/notifications/batch", json={"notifications": batch})
    assert answer.status_code == 200, answer.text
    return [item["id"] for item in answer.json()["results"]]


async def statuses(service: Service) -> dict[str, int]:
    query = sa.select(delivery.c.status, sa.func.count()).group_by(delivery.c.status)
    async with service.db.engine.connect() as conn:
        return {status: count for status, count in (await conn.execute(query)).all()}


@ON_POSTGRES
async def test_relay_and_worker_send_every_priority_once(
    client: httpx.AsyncClient, service: Service
) -> None:
    await put_type(client, "otp", priority="high", channels=("email",))
    await put_type(client, "news", priority="normal", channels=("email",))
    await put_type(client, "promo", category="marketing", priority="low", channels=("email",))
    for kind in ("otp", "news", "promo"):
        await accept(client, 100, kind)
    provider = ScriptedProvider()
    async with running(service, provider, relays=2, workers=2):
        await until_all(service, Status.SENT, 300, within=60)
    sent = [call.delivery_id for call in provider.completed]
    assert len(sent) == 300 and len(set(sent)) == 300
    assert {call.priority for call in provider.completed} == {"high", "normal", "low"}


@ON_POSTGRES
async def test_a_ticket_published_twice_is_sent_once(
    client: httpx.AsyncClient, service: Service, broker: Broker
) -> None:
    """A relay that died after the broker's acknowledgement and before its commit leaves a
    ticket behind; whichever copy arrives first takes the row, the other finds it taken."""
    await put_type(client, "otp", priority="high", channels=("email",))
    await accept(client, 20)
    provider = ScriptedProvider()
    async with running(service, provider):
        await until_all(service, Status.SENT, 20, within=30)
        tickets = await _tickets_of_sent(service)
        await _publish(broker.bootstrap, tickets)  # the same tickets again
        await asyncio.sleep(2)
    assert len(provider.completed) == 20


@ON_POSTGRES
async def test_a_stale_ticket_is_dropped_and_the_reaper_gives_the_row_back(
    client: httpx.AsyncClient, service: Service, broker: Broker
) -> None:
    """A QUEUED row whose ticket never arrives (lost with the broker's log) is not sent on
    a ticket naming another lease; once its queue lease ends it is PENDING again, and is
    published and sent."""
    await put_type(client, "otp", priority="high", channels=("email",))
    await accept(client, 1)
    now = utcnow()
    async with service.db.engine.begin() as conn:
        row = (await conn.execute(sa.select(delivery.c.id))).one()
        await conn.execute(
            sa.update(delivery).values(status="QUEUED", lease_until=now + timedelta(seconds=2))
        )
    provider = ScriptedProvider()
    async with running(service, provider):
        await _publish(broker.bootstrap, [Ticket(row.id, now + timedelta(seconds=99))])
        await asyncio.sleep(1.0)
        assert provider.completed == []
        assert await statuses(service) == {"QUEUED": 1}
        await until_all(service, Status.SENT, 1, within=20)
    assert len(provider.completed) == 1
    async with service.db.engine.connect() as conn:
        kinds = (await conn.execute(sa.select(delivery_event.c.kind))).scalars().all()
    assert "queue_expired" in kinds


@ON_POSTGRES
async def test_a_retry_goes_back_through_the_relay(
    client: httpx.AsyncClient, service: Service
) -> None:
    await put_type(client, "otp", priority="high", channels=("email",), retry={"baseDelay": 0.1})
    await accept(client, 3)
    provider = ScriptedProvider(scripts={"u1@example.com": Script(transient_failures=2)})
    async with running(service, provider):
        await until_all(service, Status.SENT, 3, within=30)
    async with service.db.engine.connect() as conn:
        attempts = dict(
            (await conn.execute(sa.select(delivery.c.address, delivery.c.attempts))).all()
        )
    assert attempts == {"u0@example.com": 1, "u1@example.com": 3, "u2@example.com": 1}
    assert len(provider.completed) == 5


@ON_POSTGRES
async def test_a_ticket_that_outruns_its_relays_commit_still_takes_its_row(
    client: httpx.AsyncClient, service: Service
) -> None:
    """The broker acknowledged the ticket and a worker read it before the relay committed
    QUEUED: the worker's claim waits for that commit instead of finding the row PENDING
    (which left it QUEUED, unsent, for a whole queue lease)."""
    await put_type(client, "otp", priority="high", channels=("email",))
    await accept(client, 1)
    claims: list[asyncio.Task[list[ClaimedDelivery]]] = []

    async def publish(due: Sequence[Due], queued_until: datetime) -> None:
        lease = utcnow() + timedelta(seconds=60)
        ticket = [(due[0].id, queued_until)]
        claims.append(asyncio.create_task(claim_queued(service.db, ticket, utcnow(), lease)))
        await asyncio.sleep(0.3)
        assert not claims[0].done(), "the claim did not wait for the relay's commit"

    now = utcnow()
    queued_until = now + timedelta(seconds=30)
    assert await relay_due(service.db, Priority.HIGH, 10, now, queued_until, publish) == 1
    claimed = await asyncio.wait_for(claims[0], timeout=10)
    assert len(claimed) == 1 and claimed[0].attempts == 1
    assert await statuses(service) == {"SENDING": 1}


@ON_POSTGRES
async def test_a_committed_offset_past_the_log_is_read_from_the_start(
    client: httpx.AsyncClient, service: Service, broker: Broker
) -> None:
    """A broker that lost its log can still be handed the old offsets (by a worker's
    commit after the restart). The partitions are read from their start, as Kafka's
    OFFSET_OUT_OF_RANGE reset does, instead of waiting for the log to grow that far."""
    await put_type(client, "otp", priority="high", channels=("email",))
    await _commit_ahead(service, broker.bootstrap, offset=100_000)
    await accept(client, 20)
    provider = ScriptedProvider()
    async with running(service, provider):
        await until_all(service, Status.SENT, 20, within=60)
    assert len(provider.completed) == 20


async def _commit_ahead(service: Service, bootstrap: str, offset: int) -> None:
    """The HIGH lane's group committed ``offset`` on every partition of its email topic."""
    topic = topic_name(Priority.HIGH, "email")
    await ensure_topics(bootstrap, service.settings.kafka, [topic])
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, group_id=group_id(Priority.HIGH), enable_auto_commit=False
    )
    await consumer.start()
    try:
        # As the lanes do: their own partitions, the group only the name of the commits.
        partitions = await eventually(consumer.topics, within=30) and (
            consumer.partitions_for_topic(topic) or set()
        )
        consumer.assign([TopicPartition(topic, p) for p in partitions])
        await consumer.commit({partition: offset for partition in consumer.assignment()})
    finally:
        await consumer.stop()


@ON_POSTGRES
async def test_the_reaper_returns_expired_queue_leases_only(
    client: httpx.AsyncClient, service: Service
) -> None:
    """QUEUED rows past their lease go back to PENDING without an attempt counted; rows
    within their lease stay."""
    await _queue(client, service, expired=2, live=3)
    assert await reap_expired_leases(service.db, utcnow()) == 2
    assert await statuses(service) == {"PENDING": 2, "QUEUED": 3}
    async with service.db.engine.connect() as conn:
        attempts = (await conn.execute(sa.select(delivery.c.attempts))).scalars().all()
    assert set(attempts) == {0}


def test_offsets_move_only_past_finished_messages() -> None:
    tracker = OffsetTracker()
    for offset in range(5):
        tracker.started("p0", offset)
    tracker.done("p0", 0)
    tracker.done("p0", 2)
    assert tracker.committable() == {"p0": 1}
    tracker.committed({"p0": 1})
    assert tracker.committable() == {}
    tracker.done("p0", 1)
    assert tracker.committable() == {"p0": 3}
    tracker.rewind("p0", 3)  # 3 and 4 will be read again
    assert tracker.in_progress() == 0
    tracker.forget(["p0"])
    tracker.done("p0", 3)  # a revoked partition's late finish is ignored
    assert tracker.committable() == {}


def test_a_ticket_round_trips_and_junk_is_not_a_ticket() -> None:
    ticket = Ticket(uuid.uuid4(), utcnow())
    assert Ticket.decode(ticket.encode()) == ticket
    for junk in (None, b"", b"{}", b"[1]", b'{"delivery":"x","queuedUntil":"y"}'):
        assert Ticket.decode(junk) is None


def test_kafka_needs_a_broker_and_postgresql(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="kafka_bootstrap"):
        Settings(transport="kafka", database_url="postgresql://x/y")
    with pytest.raises(ValueError, match="PostgreSQL"):
        Settings(transport="kafka", kafka_bootstrap="b:9092", database_url="sqlite:///x.db")


async def _all(service: Service, status: Status, count: int) -> bool:
    return await statuses(service) == {status.value: count}


async def until_all(service: Service, status: Status, count: int, within: float) -> None:
    """Every delivery in ``status``; else fail showing the rows and their history."""
    try:
        await eventually(lambda: _all(service, status, count), within=within)
    except AssertionError as error:
        columns = (
            delivery.c.address,
            delivery.c.status,
            delivery.c.attempts,
            delivery.c.lease_until,
        )
        async with service.db.engine.connect() as conn:
            rows = (await conn.execute(sa.select(*columns))).all()
            events = (
                await conn.execute(sa.select(delivery_event.c.kind, delivery_event.c.at))
            ).all()
        raise AssertionError(f"{error}\nnow {utcnow()}\nrows {rows}\nevents {events}") from None


async def _tickets_of_sent(service: Service) -> list[Ticket]:
    """Tickets naming each sent row as it was while QUEUED (its lease is gone: any one)."""
    async with service.db.engine.connect() as conn:
        ids = (await conn.execute(sa.select(delivery.c.id))).scalars().all()
    return [Ticket(i, utcnow()) for i in ids]


async def _publish(bootstrap: str, tickets: list[Ticket]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        for ticket in tickets:
            await producer.send_and_wait(topic_name(Priority.HIGH, "email"), ticket.encode())
    finally:
        await producer.stop()


async def _queue(client: httpx.AsyncClient, service: Service, expired: int, live: int) -> None:
    """Accepted deliveries made QUEUED, the first ``expired`` past their queue lease."""
    await put_type(client, "otp", priority="high", channels=("email",))
    await accept(client, expired + live)
    now = utcnow()
    async with service.db.engine.begin() as conn:
        ids = (await conn.execute(sa.select(delivery.c.id).order_by(delivery.c.id))).scalars()
        for n, delivery_id in enumerate(ids.all()):
            lease = now + timedelta(seconds=-5 if n < expired else 60)
            await conn.execute(
                sa.update(delivery)
                .where(delivery.c.id == delivery_id)
                .values(status="QUEUED", lease_until=lease)
            )


def test_the_commands_say_what_the_kafka_transport_needs() -> None:
    from typer.testing import CliRunner

    from tidings.cli.app import app

    runner = CliRunner()
    direct = runner.invoke(app, ["relay"], env={"TIDINGS_TRANSPORT": "direct"})
    assert direct.exit_code == 1 and "TIDINGS_TRANSPORT=kafka" in direct.output
    kafka = {
        "TIDINGS_TRANSPORT": "kafka",
        "TIDINGS_KAFKA_BOOTSTRAP": "127.0.0.1:1",
        "TIDINGS_DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none",
    }
    refused = runner.invoke(app, ["dispatch"], env=kafka)
    assert refused.exit_code == 1 and "tidings relay" in refused.output
    bad_lane = runner.invoke(app, ["worker", "--lanes", "high,urgent"], env=kafka)
    assert bad_lane.exit_code == 1 and "--lanes: unknown name 'urgent'" in bad_lane.output
    no_broker = runner.invoke(app, ["worker"], env={"TIDINGS_TRANSPORT": "kafka"})
    assert no_broker.exit_code == 1 and "kafka_bootstrap" in no_broker.output
