"""The Kafka transport's tests of what the relay and the workers' claim by ticket promise
(tests/system/test_kafka_transport.py), on day partitions: there both name each day's partitions
(store/queue.py), one day per transaction for the workers."""

from __future__ import annotations

import pytest

from tests.system.test_kafka_transport import (  # noqa: F401 (the fixtures and tests run here)
    broker,
    settings,
    test_a_retry_goes_back_through_the_relay,
    test_a_stale_ticket_is_dropped_and_the_reaper_gives_the_row_back,
    test_a_ticket_published_twice_is_sent_once,
    test_a_ticket_that_outruns_its_relays_commit_still_takes_its_row,
    test_relay_and_worker_send_every_priority_once,
)
from tidings.clock import utcnow
from tidings.store.engine import connect
from tidings.store.partitions import enable_partitions


@pytest.fixture
async def database_url(backend: str, pg_plain_database_url: str) -> str:
    """The tests' PostgreSQL database (they run on PostgreSQL alone), on day partitions:
    today's and tomorrow's alone, converted from plain tables."""
    assert backend == "postgresql"
    db = connect(pg_plain_database_url)
    try:
        await enable_partitions(db, utcnow().date(), 1)
    finally:
        await db.dispose()
    return pg_plain_database_url
