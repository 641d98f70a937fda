"""At most once across crashes (docs/architecture.md, Claims, leases, fences and the reaper):
an at-most-once account's provider call is recorded on the delivery's row before it is made
(``send_started_at``, fenced, group-committed), cleared by the attempt's outcome, and a
lease that expires with it set ends the delivery FAILED ambiguous instead of PENDING."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from tests.helpers import eventually, post, put_type
from tidings.assembly import assemble_dispatcher
from tidings.clock import utcnow
from tidings.dispatch.pipeline.send_starts import SendStarts
from tidings.priorities import Priority
from tidings.providers.accounts import AccountSettings
from tidings.providers.base import Message, SendResult
from tidings.providers.chains import ProviderSet
from tidings.service import Service
from tidings.states import Status
from tidings.store.claims import ClaimedDelivery, claim_due, reap_expired_leases
from tidings.store.engine import Database
from tidings.store.outcomes import Outcome, SendStart, mark_sends_started, write_outcomes
from tidings.store.schema import delivery

ONCE = "sms-once"  # on_ambiguous = fail
AGAIN = "mail-again"  # on_ambiguous = retry


async def row(db: Database, delivery_id: uuid.UUID | str) -> Any:
    query = sa.select(delivery).where(delivery.c.id == uuid.UUID(str(delivery_id)))
    async with db.engine.connect() as conn:
        return (await conn.execute(query)).one()


async def rows(db: Database, ids: Sequence[uuid.UUID | str]) -> list[Any]:
    return [await row(db, i) for i in ids]


async def accept_sms(client: httpx.AsyncClient) -> str:
    await put_type(client, "code", channels=("sms",))
    answer = await post(client, {"type": "code", "to": {"phone": "+15550001111"}})
    assert answer.status_code == 202, answer.text
    return str(answer.json()["deliveries"][0]["id"])


async def claim(db: Database, now: datetime, lease: float = 1.0) -> ClaimedDelivery:
    [claimed] = await claim_due(db, Priority.NORMAL, 1, now, now + timedelta(seconds=lease))
    return claimed


def start_of(claimed: ClaimedDelivery, attempts: int | None = None) -> SendStart:
    attempts = claimed.attempts if attempts is None else attempts
    return first_start(claimed.id, attempts)


def first_start(delivery_id: uuid.UUID, attempts: int = 1) -> SendStart:
    return SendStart(delivery_id=delivery_id, claimed_attempts=attempts, account=ONCE)


@dataclass
class Claimed:
    """An SMS accepted (its id as the API answered) and claimed at ``now`` for 1 s."""

    delivery_id: str
    now: datetime
    delivery: ClaimedDelivery


@pytest.fixture
async def claimed_sms(client: httpx.AsyncClient, db: Database) -> Claimed:
    delivery_id = await accept_sms(client)
    now = utcnow()
    return Claimed(delivery_id, now, await claim(db, now))


async def test_a_lease_lost_during_the_call_fails_ambiguous_into_the_dead_letters(
    client: httpx.AsyncClient, db: Database, claimed_sms: Claimed
) -> None:
    delivery_id, now, claimed = claimed_sms.delivery_id, claimed_sms.now, claimed_sms.delivery
    assert await mark_sends_started(db, [start_of(claimed)], now) == {claimed.id}
    # The process dies during the provider call: the reaper finds the mark.
    later = now + timedelta(seconds=2)
    assert await reap_expired_leases(db, later) == 1
    failed = await row(db, delivery_id)
    assert (failed.status, failed.failure_kind, failed.provider) == ("FAILED", "ambiguous", ONCE)
    assert failed.lease_until is None and failed.send_started_at is not None
    shown = (await client.get(f"/v1/notifications/{claimed.notification_id}")).json()
    [history] = [d["history"] for d in shown["deliveries"]]
    last = history[-1]
    assert last["kind"] == "failed"
    assert last["detail"]["failureKind"] == "ambiguous" and last["detail"]["perhapsSent"]
    dead = (await client.get("/v1/dead-letters")).json()
    assert [(d["id"], d["failureKind"]) for d in dead] == [(delivery_id, "ambiguous")]

    # Replayed by an operator: fresh attempts, the mark cleared, so a later crash before
    # the call returns it to PENDING as any unmarked lease does.
    replayed = await client.post(f"/v1/deliveries/{delivery_id}/replay")
    assert replayed.status_code == 200, replayed.text
    assert (await row(db, delivery_id)).send_started_at is None
    again = await claim(db, later)
    assert await reap_expired_leases(db, later + timedelta(seconds=2)) == 1
    back = await row(db, delivery_id)
    assert (back.status, back.attempts, back.failure_kind) == ("PENDING", again.attempts, None)


async def test_a_start_mark_is_fenced_and_cleared_by_the_outcome(
    db: Database, claimed_sms: Claimed
) -> None:
    delivery_id, now, claimed = claimed_sms.delivery_id, claimed_sms.now, claimed_sms.delivery
    # Another attempt's mark (a stale worker) holds no fence and marks nothing.
    assert await mark_sends_started(db, [start_of(claimed, claimed.attempts - 1)], now) == set()
    assert (await row(db, delivery_id)).send_started_at is None
    assert await mark_sends_started(db, [start_of(claimed)], now) == {claimed.id}
    # The call failed for sure (not ambiguous): a retry, and the mark goes with the attempt.
    retry = Outcome(
        delivery_id=claimed.id,
        claimed_attempts=claimed.attempts,
        status=Status.PENDING,
        attempts=claimed.attempts,
        next_attempt_at=now,
        event="retry_scheduled",
        event_detail={},
    )
    await write_outcomes(db, [retry], now)
    assert (await row(db, delivery_id)).send_started_at is None
    # The next attempt dies before its call: back to PENDING, not failed ambiguous.
    await claim(db, now)
    assert await reap_expired_leases(db, now + timedelta(seconds=2)) == 1
    assert (await row(db, delivery_id)).status == "PENDING"
    # A SENT outcome (the set-based write on PostgreSQL) clears it too.
    third = await claim(db, now + timedelta(seconds=2))
    await mark_sends_started(db, [start_of(third)], now)
    sent = Outcome(
        delivery_id=third.id,
        claimed_attempts=third.attempts,
        status=Status.SENT,
        attempts=third.attempts,
        sent_at=now,
    )
    await write_outcomes(db, [sent], now)
    done = await row(db, delivery_id)
    assert (done.status, done.send_started_at) == ("SENT", None)


async def test_concurrent_starts_share_one_write(
    client: httpx.AsyncClient, service: Service
) -> None:
    db = service.db
    await put_type(client, "code", channels=("sms",))
    for n in range(20):
        await post(client, {"type": "code", "to": {"phone": f"+1555000{n:04d}"}})
    now = utcnow()
    claimed = await claim_due(db, Priority.NORMAL, 20, now, now + timedelta(seconds=60))
    groups: list[int] = []

    async def mark(starts: Sequence[SendStart]) -> set[uuid.UUID]:
        groups.append(len(starts))
        return await mark_sends_started(db, starts, utcnow())

    starts = SendStarts(db, mark=mark)
    held = await asyncio.gather(*(starts.started(start_of(c)) for c in claimed))
    assert held == [True] * 20
    assert sum(groups) == 20 and len(groups) <= 2, groups


class Peeking:
    """Answers at once, having read its delivery's row as the call is made; or hangs."""

    name = "peeking"

    def __init__(self, db: Database, hang: bool = False) -> None:
        self.db = db
        self.hang = hang
        self.seen: dict[str, tuple[datetime | None, str | None]] = {}

    async def send(self, message: Message) -> SendResult:
        found = await row(self.db, message.delivery_id)
        self.seen[message.channel.value] = (found.send_started_at, found.provider)
        if self.hang:
            await asyncio.Event().wait()
        return SendResult(provider=self.name, provider_msg_id=f"p-{message.delivery_id}")

    async def close(self) -> None:
        return None


@asynccontextmanager
async def dispatching(service: Service, provider: Peeking) -> AsyncIterator[None]:
    """A dispatcher sending SMS through an at-most-once account, email through a retry one."""
    providers = ProviderSet(
        {ONCE: provider, AGAIN: provider},
        {"sms": [ONCE], "email": [AGAIN]},
        {
            ONCE: AccountSettings(kind="peeking", on_ambiguous="fail"),
            AGAIN: AccountSettings(kind="peeking", on_ambiguous="retry"),
        },
    )
    stop = asyncio.Event()
    task = asyncio.create_task(assemble_dispatcher(service, providers).run(stop))
    try:
        yield
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=30)


async def accept_both(client: httpx.AsyncClient) -> list[str]:
    await put_type(client, "both", channels=("email", "sms"))
    body = {"type": "both", "to": {"email": "ana@example.com", "phone": "+15550002222"}}
    answer = await post(client, body)
    assert answer.status_code == 202, answer.text
    return [str(d["id"]) for d in answer.json()["deliveries"]]


async def test_an_at_most_once_call_is_recorded_before_it_is_made(
    client: httpx.AsyncClient, service: Service
) -> None:
    ids = await accept_both(client)
    provider = Peeking(service.db)
    async with dispatching(service, provider):

        async def sent() -> bool:
            return [r.status for r in await rows(service.db, ids)] == ["SENT", "SENT"]

        await eventually(sent)
    started, account = provider.seen["sms"]
    assert started is not None and account == ONCE
    assert provider.seen["email"] == (None, None)  # a retry account is not marked
    for found in await rows(service.db, ids):
        assert found.send_started_at is None


async def test_a_shutdown_during_an_at_most_once_call_fails_it_ambiguous(
    client: httpx.AsyncClient, service: Service
) -> None:
    service.settings = service.settings.model_copy(update={"shutdown_grace": 0.05})
    ids = await accept_both(client)
    provider = Peeking(service.db, hang=True)
    async with dispatching(service, provider):
        await eventually(lambda: len(provider.seen) == 2)
    statuses = {
        found.channel: (found.status, found.failure_kind, found.attempts)
        for found in await rows(service.db, ids)
    }
    # The SMS may have gone out: never sent again. The email is given back, as before.
    assert statuses == {"sms": ("FAILED", "ambiguous", 1), "email": ("PENDING", None, 0)}


async def test_a_mark_the_database_refuses_fails_each_of_its_sends(db: Database) -> None:
    """A write that fails leaves every send of its group unsure of its mark: each is told
    (and so not sent), and the next group is written as usual."""
    calls: list[int] = []

    async def mark(starts: Sequence[SendStart]) -> set[uuid.UUID]:
        calls.append(len(starts))
        if len(calls) == 1:
            raise ConnectionError("database away")
        return {s.delivery_id for s in starts}

    starts = SendStarts(db, mark=mark)
    ids = [uuid.uuid4() for _ in range(3)]
    first = await asyncio.gather(
        *(starts.started(first_start(i)) for i in ids),
        return_exceptions=True,
    )
    assert all(isinstance(result, ConnectionError) for result in first), first
    assert await starts.started(first_start(ids[0])) is True
