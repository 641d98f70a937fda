"""The delivery state machine (docs/architecture.md, Delivery state machine), driven through the
real store.

Each test gets one migrated database (SQLite and PostgreSQL, from the ``database_url``
fixture); every Hypothesis example clears it and works on new deliveries.

A Hypothesis state machine claims, answers, defers, crashes and advances a fake clock over
real deliveries, with the real claim / outcome / reaper SQL and the real attempt functions,
and checks after every step, from the database, that:

- every status change is allowed by ``TRANSITIONS``;
- the database holds exactly what a model of the store predicts (attempts counted by claims,
  given back by deferrals; leases; next attempt times);
- the provider is never called with an attempt beyond the policy's maximum (a claim after
  lost leases may count one, and must then fail EXHAUSTED without calling the provider);
- a stale outcome (its lease expired, the delivery maybe claimed again) changes nothing;
- at most once across crashes: on an at-most-once account the provider call is preceded by
  its start mark (fenced: a stale worker's mark holds nothing, and it does not call), every
  outcome clears the mark, and a lease lost with the mark set ends the delivery FAILED
  ambiguous instead of PENDING;
- running the dispatcher loop to completion ends every delivery SENT or FAILED (exhausted,
  permanent or poison) within a bounded number of rounds.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections import Counter, deque
from collections.abc import Coroutine, Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar, Literal, TypeVar

import pytest
import sqlalchemy as sa
from hypothesis import event, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    precondition,
    rule,
    run_state_machine_as_test,
)

from tidings.content.catalog import TemplateCatalog
from tidings.dispatch.pipeline.attempt import Composer, Sender, Target
from tidings.dispatch.pipeline.retry import RetryPolicy
from tidings.dispatch.pipeline.send_checks import precheck
from tidings.dispatch.pipeline.types import TypeRules
from tidings.ids import new_id
from tidings.priorities import Priority
from tidings.providers.base import (
    Message,
    PermanentError,
    PoisonError,
    SendResult,
    TransientError,
)
from tidings.providers.testing import Script, ScriptedProvider
from tidings.states import TRANSITIONS, FailureKind, Status, can_move
from tidings.store.claims import ClaimedDelivery, claim_due, reap_expired_leases
from tidings.store.engine import Database, connect
from tidings.store.intake import DeliveryDraft, NotificationDraft, accept
from tidings.store.outcomes import Outcome, SendStart, mark_sends_started, write_outcomes
from tidings.store.schema import delivery, delivery_event, notification
from tidings.store.templates import add_version

T = TypeVar("T")

START = datetime(2030, 1, 1, tzinfo=UTC)
LEASE = timedelta(seconds=60)
SEND_TIMEOUT = 5.0
TICK = timedelta(microseconds=1)  # timedelta(seconds=x) rounds x to the microsecond
PRIORITIES = (Priority.HIGH, Priority.NORMAL)
ENDINGS = {FailureKind.EXHAUSTED.value, FailureKind.PERMANENT.value, FailureKind.POISON.value}
AMBIGUOUS = FailureKind.AMBIGUOUS.value


# ---------------------------------------------------------------------------------------------
# The state graph itself


def reachable(start: Status, edges: dict[Status, frozenset[Status]]) -> set[Status]:
    seen: set[Status] = set()
    todo = deque([start])
    while todo:
        status = todo.popleft()
        for target in edges[status]:
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def without_replay() -> dict[Status, frozenset[Status]]:
    edges = dict(TRANSITIONS)
    edges[Status.FAILED] = edges[Status.FAILED] - {Status.PENDING}
    return edges


def test_transitions_cover_every_status() -> None:
    assert set(TRANSITIONS) == set(Status)
    for targets in TRANSITIONS.values():
        assert targets <= set(Status)


def test_in_progress_statuses_are_exactly_pending_queued_sending() -> None:
    in_progress = {s for s in Status if not s.is_terminal}
    assert in_progress == {Status.PENDING, Status.QUEUED, Status.SENDING}


def test_replay_is_the_only_way_back_from_a_terminal_status() -> None:
    assert can_move(Status.FAILED, Status.PENDING)  # replay from the dead-letter queue
    edges = without_replay()
    for status in Status:
        if status.is_terminal:
            assert Status.PENDING not in reachable(status, edges), status
            # Webhooks may still move a terminal delivery, but only to another terminal one.
            assert all(target.is_terminal for target in edges[status]), status


def test_every_in_progress_status_can_end() -> None:
    for status in Status:
        if not status.is_terminal:
            assert any(s.is_terminal for s in reachable(status, TRANSITIONS)), status


@pytest.mark.parametrize(
    ("current", "target", "allowed"),
    [
        (Status.PENDING, Status.SENDING, True),  # claim
        (Status.SENDING, Status.SENT, True),
        (Status.SENDING, Status.PENDING, True),  # retry, deferral, lease expiry
        (Status.SENDING, Status.FAILED, True),
        (Status.SENT, Status.DELIVERED, True),
        (Status.SENT, Status.BOUNCED, True),
        (Status.PENDING, Status.SENT, False),  # never sent without a claim
        (Status.PENDING, Status.FAILED, False),
        (Status.SENDING, Status.SENDING, False),
        (Status.SENT, Status.PENDING, False),
        (Status.SENT, Status.FAILED, True),  # the provider gave up after accepting it
        (Status.DELIVERED, Status.SENT, False),
        (Status.CANCELLED, Status.PENDING, False),
        (Status.FAILED, Status.SENDING, False),
    ],
)
def test_design_edges(current: Status, target: Status, allowed: bool) -> None:
    assert can_move(current, target) is allowed


# ---------------------------------------------------------------------------------------------
# Helpers shared by the store-driven tests


@dataclass(frozen=True)
class Response:
    """What the provider answers to one send."""

    kind: Literal["ok", "transient", "permanent", "poison"]
    retry_after: float | None = None


responses = st.one_of(
    st.just(Response("ok")),
    st.builds(
        Response,
        kind=st.just("transient"),
        retry_after=st.none() | st.floats(min_value=0, max_value=900, allow_nan=False),
    ),
    st.just(Response("permanent")),
    st.just(Response("poison")),
)
# How the provider answers one delivery's successive sends when the dispatcher runs it to
# completion (the last answer repeats).
scripts = st.lists(responses, min_size=1, max_size=4)


class AnsweringProvider:
    """A provider that answers each send as the test says, and records every call."""

    name = "answering"

    def __init__(self) -> None:
        self.calls: list[Message] = []
        self.answer = Response("ok")

    async def send(self, message: Message) -> SendResult:
        self.calls.append(message)
        answer = self.answer
        if answer.kind == "transient":
            raise TransientError("scripted transient", retry_after=answer.retry_after)
        if answer.kind == "permanent":
            raise PermanentError("scripted permanent")
        if answer.kind == "poison":
            raise PoisonError("scripted poison")
        return SendResult(provider=self.name, provider_msg_id=f"m-{message.delivery_id}")

    async def close(self) -> None:
        return None


def draft(priority: Priority, address: str) -> NotificationDraft:
    return NotificationDraft(
        id=new_id(),
        namespace="hypothesis",
        idempotency_key=str(uuid.uuid4()),
        request_hash="0" * 64,
        type="order.confirmed",
        category="transactional",
        priority=priority,
        user_id=None,
        data={},
        locale=None,
        send_at=None,
        deliveries=[DeliveryDraft(id=new_id(), channel="email", address=address)],
    )


async def clear(db: Database) -> None:
    async with db.engine.begin() as conn:
        for table in (delivery_event, delivery, notification):
            await conn.execute(sa.delete(table))
    # Stores nothing when this template is already the newest version.
    await add_version(db, "order.confirmed", "email", "en", TEMPLATE, START)


TEMPLATE = {"subject": "Order", "text": "Order {{ data | tojson }}"}


async def read_rows(db: Database) -> dict[uuid.UUID, dict[str, Any]]:
    async with db.engine.connect() as conn:
        rows = (await conn.execute(sa.select(delivery))).all()
    return {row.id: row._asdict() for row in rows}


async def read_events(db: Database) -> Counter[tuple[uuid.UUID, str]]:
    """How many events of each kind each delivery's history holds."""
    query = sa.select(delivery_event.c.delivery_id, delivery_event.c.kind)
    async with db.engine.connect() as conn:
        return Counter((row.delivery_id, row.kind) for row in await conn.execute(query))


def ceiling(policy: RetryPolicy, attempts: int) -> timedelta:
    return timedelta(seconds=min(policy.max_delay, policy.base_delay * 2.0 ** (attempts - 1)))


# ---------------------------------------------------------------------------------------------
# The model


@dataclass(frozen=True)
class Row:
    """What the model expects of one delivery row."""

    status: Status
    attempts: int
    next_attempt_at: datetime | None
    lease_until: datetime | None
    failure_kind: str | None
    priority: Priority
    started: bool = False  # the start mark of an at-most-once call (send_started_at)

    @staticmethod
    def of(row: dict[str, Any]) -> Row:
        return Row(
            Status(row["status"]),
            row["attempts"],
            row["next_attempt_at"],
            row["lease_until"],
            row["failure_kind"],
            Priority(row["priority"]),
            row["send_started_at"] is not None,
        )


@dataclass(frozen=True)
class Claim:
    """One worker's hold on one delivery: what claim_due returned, and its lease."""

    claimed: ClaimedDelivery
    lease_until: datetime
    started: bool = False  # its at-most-once provider call has begun (the mark written)


class DeliveryMachine(RuleBasedStateMachine):
    url: ClassVar[str]  # one migrated database per test, set by a subclass

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.db = connect(self.url)
        self.run(clear(self.db))  # leftovers of an earlier (maybe failed) example
        self.now = START
        self.policy = RetryPolicy()
        self.type_rules = TypeRules(self.policy, None)
        self.rng = random.Random(0)
        self.provider = AnsweringProvider()
        self.composer = Composer(TemplateCatalog(self.db))
        self.model: dict[uuid.UUID, Row] = {}
        self.seen: dict[uuid.UUID, Status] = {}
        self.scripts: dict[uuid.UUID, list[Response]] = {}
        self.in_flight: list[Claim] = []
        self.sends: Counter[uuid.UUID] = Counter()
        self.once: set[uuid.UUID] = set()  # deliveries of an at-most-once account

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coroutine)

    def teardown(self) -> None:
        try:
            self.run(self.db.dispose())
        finally:
            self.loop.close()

    # -- set-up ----------------------------------------------------------------------------

    @initialize(
        max_attempts=st.integers(min_value=1, max_value=4),
        base_delay=st.floats(min_value=0.5, max_value=30),
        max_delay=st.floats(min_value=1, max_value=120),
        rng=st.randoms(use_true_random=False),
        deliveries=st.lists(
            st.tuples(st.sampled_from(PRIORITIES), scripts, st.booleans()),
            min_size=1,
            max_size=4,
        ),
    )
    def start(
        self,
        max_attempts: int,
        base_delay: float,
        max_delay: float,
        rng: random.Random,
        deliveries: list[tuple[Priority, list[Response], bool]],
    ) -> None:
        self.policy = RetryPolicy(base_delay, max_delay, max_attempts)
        self.type_rules = TypeRules(self.policy, None)
        self.rng = rng
        for priority, script, once in deliveries:
            self.add_delivery(priority, script, once)

    # -- rules -----------------------------------------------------------------------------

    @rule(priority=st.sampled_from(PRIORITIES), script=scripts, once=st.booleans())
    def add_delivery(self, priority: Priority, script: list[Response], once: bool) -> None:
        address = f"user{len(self.model)}@example.com"
        notification_draft = draft(priority, address)
        self.run(accept(self.db, [notification_draft], self.now))
        delivery_id = notification_draft.deliveries[0].id
        self.model[delivery_id] = Row(Status.PENDING, 0, self.now, None, None, priority)
        self.scripts[delivery_id] = script
        if once:
            self.once.add(delivery_id)
        self.check_database()

    @rule(priority=st.sampled_from(PRIORITIES), limit=st.integers(min_value=1, max_value=3))
    def claim(self, priority: Priority, limit: int) -> None:
        self.claim_now(priority, limit)

    @precondition(lambda self: bool(self.in_flight))
    @rule(data=st.data(), response=responses)
    def answer(self, data: st.DataObject, response: Response) -> None:
        """The worker holding a claim gets its answer from the provider (or from precheck)."""
        index = data.draw(st.integers(min_value=0, max_value=len(self.in_flight) - 1))
        self.answer_claim(self.in_flight.pop(index), response)

    @precondition(lambda self: any(not c.started for c in self.in_flight))
    @rule(data=st.data())
    def defer(self, data: st.DataObject) -> None:
        """Not the provider's fault (rate limit, open breaker): give the attempt back (before
        any provider call)."""
        waiting = [c for c in self.in_flight if not c.started]
        claim = data.draw(st.sampled_from(waiting))
        self.in_flight.remove(claim)
        outcome = Outcome.released(claim.claimed, self.now, "deferral")
        assert outcome.attempts == claim.claimed.attempts - 1
        assert outcome.next_attempt_at == self.now
        self.write(claim, outcome)

    @precondition(lambda self: bool(self.in_flight))
    @rule(data=st.data(), dies=st.booleans(), reclaim=st.booleans())
    def lose_lease(self, data: st.DataObject, dies: bool, reclaim: bool) -> None:
        """A worker crashes (``dies``: its outcome is never written) or stalls past its
        lease (it may answer later, stale); the reaper returns the delivery to PENDING, and
        maybe another worker claims it at once."""
        index = data.draw(st.integers(min_value=0, max_value=len(self.in_flight) - 1))
        claim = self.in_flight.pop(index) if dies else self.in_flight[index]
        self.now = max(self.now, claim.lease_until + timedelta(seconds=1))
        self.reap()
        if reclaim:
            self.claim_now(self.model[claim.claimed.id].priority, 3)

    @precondition(lambda self: bool(self.in_flight))
    @rule(data=st.data(), response=responses)
    def answer_after_reclaim(self, data: st.DataObject, response: Response) -> None:
        """A worker stalls past its lease, another claims the delivery again, then the first
        one answers at last: its outcome is stale and must change nothing."""
        index = data.draw(st.integers(min_value=0, max_value=len(self.in_flight) - 1))
        claim = self.in_flight.pop(index)
        self.now = max(self.now, claim.lease_until + timedelta(seconds=1))
        self.reap()
        self.claim_now(self.model[claim.claimed.id].priority, 1000)
        self.answer_claim(claim, response)

    @precondition(lambda self: any(self.may_start(c) for c in self.in_flight))
    @rule(data=st.data())
    def start_call(self, data: st.DataObject) -> None:
        """An at-most-once send writes its start mark, then calls the provider (which has not
        answered yet). A stale worker's mark holds no fence: it gives the delivery back
        uncalled."""
        claim = data.draw(st.sampled_from([c for c in self.in_flight if self.may_start(c)]))
        index = self.in_flight.index(claim)
        fresh = self.is_fresh(claim)
        marked = self.run(self.mark(claim))
        assert marked == fresh
        if fresh:
            self.model[claim.claimed.id] = replace(self.model[claim.claimed.id], started=True)
            self.in_flight[index] = replace(claim, started=True)
            self.check_database()
        else:
            event("a stale worker's start mark held nothing")
            self.in_flight.pop(index)
            self.write(claim, Outcome.released(claim.claimed, self.now, "lease lost"))

    @rule(seconds=st.floats(min_value=0, max_value=300))
    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)

    @precondition(lambda self: any(r.status is Status.PENDING for r in self.model.values()))
    @rule()
    def advance_to_next_due(self) -> None:
        self.now = max(self.now, min(self.pending_times()))

    @rule()
    def reap_leases(self) -> None:
        self.reap()

    @precondition(lambda self: not all(r.status.is_terminal for r in self.model.values()))
    @rule()
    def run_to_completion(self) -> None:
        """The dispatcher loop, until nothing is left: every delivery ends terminal."""
        rounds = self.policy.max_attempts + 2
        for _ in range(rounds):
            for claim in list(self.in_flight):  # in-flight workers finish first
                self.answer_claim(claim, self.scripted(claim.claimed.id))
            self.in_flight.clear()
            if all(row.status.is_terminal for row in self.model.values()):
                break
            self.now = max([self.now, *self.times()]) + timedelta(seconds=1)
            self.reap()
            for priority in PRIORITIES:
                self.claim_now(priority, 1000)
        else:
            pytest.fail(f"deliveries not finished after {rounds} rounds: {self.model}")
        for row in self.model.values():
            assert row.status in (Status.SENT, Status.FAILED), row
            if row.status is Status.FAILED:
                assert row.failure_kind in ENDINGS | {AMBIGUOUS}, row
        event(f"completed {len(self.model)} deliveries")

    # -- the store operations, each followed by a check against the database ---------------

    def claim_now(self, priority: Priority, limit: int) -> None:
        due = {
            delivery_id: row.next_attempt_at
            for delivery_id, row in self.model.items()
            if row.status is Status.PENDING
            and row.priority is priority
            and row.next_attempt_at is not None
            and row.next_attempt_at <= self.now
        }
        lease_until = self.now + LEASE
        claimed = self.run(claim_due(self.db, priority, limit, self.now, lease_until))

        assert len(claimed) == min(limit, len(due))
        ids = {c.id for c in claimed}
        assert ids <= set(due), "claimed a delivery that was not due"
        # The longest waiting go first.
        if claimed and len(due) > len(claimed):
            latest_taken = max(at for i, at in due.items() if i in ids)
            earliest_left = min(at for i, at in due.items() if i not in ids)
            assert latest_taken <= earliest_left
        for item in claimed:
            before = self.model[item.id]
            assert item.attempts == before.attempts + 1, "a claim counts one attempt"
            self.model[item.id] = replace(
                before, status=Status.SENDING, attempts=item.attempts, lease_until=lease_until
            )
            self.in_flight.append(Claim(item, lease_until))
        self.check_database()

    def may_start(self, claim: Claim) -> bool:
        """An at-most-once send that has not begun its call, with attempts left to call."""
        claimed = claim.claimed
        return (
            claimed.id in self.once
            and not claim.started
            and claimed.attempts <= self.policy.max_attempts
        )

    def is_fresh(self, claim: Claim) -> bool:
        current = self.model[claim.claimed.id]
        return current.status is Status.SENDING and current.attempts == claim.claimed.attempts

    async def mark(self, claim: Claim) -> bool:
        claimed = claim.claimed
        start = SendStart(
            delivery_id=claimed.id, claimed_attempts=claimed.attempts, account="answering"
        )
        return await mark_sends_started(self.db, [start], self.now) == {claimed.id}

    def answer_claim(self, claim: Claim, response: Response) -> None:
        claimed = claim.claimed
        calls_before = len(self.provider.calls)
        outcome = precheck(claimed, self.type_rules, self.now)
        lost = False
        if outcome is None:
            self.provider.answer = response
            target = Target(self.provider)
            if self.may_start(claim):  # the sender marks the start just before the call

                async def begin() -> str | None:
                    return None if await self.mark(claim) else "lease lost"

                lost = not self.is_fresh(claim)
                target = Target(self.provider, at_most_once=True, begin=begin)
            outcome = self.run(
                Sender(self.composer, SEND_TIMEOUT, self.rng).attempt(
                    claimed, self.type_rules, target, self.now
                )
            )
        called = len(self.provider.calls) - calls_before
        if called:
            self.sends[claimed.id] += 1
            assert self.provider.calls[-1].attempt == claimed.attempts
        if lost:
            event("a stale at-most-once worker did not call the provider")
            assert called == 0 and outcome.event == "released", outcome
        else:
            self.check_outcome(claimed, response, outcome, called)
        self.write(claim, outcome)

    def check_outcome(
        self, claimed: ClaimedDelivery, response: Response, outcome: Outcome, called: int
    ) -> None:
        """The outcome is what docs/architecture.md (Delivery state machine) says for this answer
        at this attempt."""
        limit = self.policy.max_attempts
        assert outcome.claimed_attempts == claimed.attempts
        assert outcome.attempts == claimed.attempts  # a real attempt stays counted
        if claimed.attempts > limit:
            event("claimed beyond max attempts after a lost lease")
            assert called == 0, "provider called with no attempts left"
            assert (outcome.status, outcome.failure_kind) == (Status.FAILED, "exhausted")
            return
        assert called == 1
        if response.kind == "ok":
            assert outcome.status is Status.SENT
            assert outcome.sent_at == self.now
        elif response.kind in ("permanent", "poison"):
            assert (outcome.status, outcome.failure_kind) == (Status.FAILED, response.kind)
        elif claimed.attempts >= limit:
            assert (outcome.status, outcome.failure_kind) == (Status.FAILED, "exhausted")
        else:
            assert outcome.status is Status.PENDING
            assert outcome.failure_kind is None
            assert outcome.next_attempt_at is not None
            if response.retry_after is not None:
                assert outcome.next_attempt_at == self.now + timedelta(seconds=response.retry_after)
            else:
                window = ceiling(self.policy, claimed.attempts)
                assert self.now <= outcome.next_attempt_at <= self.now + window + TICK

    def write(self, claim: Claim, outcome: Outcome) -> None:
        delivery_id = claim.claimed.id
        before = self.run(read_rows(self.db))[delivery_id]
        history = self.run(read_events(self.db))
        current = self.model[delivery_id]
        fresh = current.status is Status.SENDING and current.attempts == claim.claimed.attempts
        self.run(write_outcomes(self.db, [outcome], self.now))
        if fresh:
            self.model[delivery_id] = replace(
                current,
                status=outcome.status,
                attempts=outcome.attempts,
                next_attempt_at=outcome.next_attempt_at,
                lease_until=None,
                failure_kind=outcome.failure_kind,
                started=False,  # the outcome ends the attempt, and its start mark
            )
            added = Counter([(delivery_id, outcome.event)] if outcome.event else [])
            assert self.run(read_events(self.db)) == history + added
        else:
            event(f"stale outcome on a {current.status.value} delivery")
            after = self.run(read_rows(self.db))[delivery_id]
            assert after == before, "a stale outcome changed the delivery"
            assert self.run(read_events(self.db)) == history, "a stale outcome left an event"
        self.check_database()

    def reap(self) -> None:
        expired = [
            delivery_id
            for delivery_id, row in self.model.items()
            if row.status is Status.SENDING
            and row.lease_until is not None
            and row.lease_until < self.now
        ]
        history = self.run(read_events(self.db))
        assert self.run(reap_expired_leases(self.db, self.now)) == len(expired)
        # A call that had started may have sent: at most once, it is never handed out again.
        perhaps_sent = [i for i in expired if self.model[i].started]
        lost = Counter((i, "failed" if i in perhaps_sent else "lease_expired") for i in expired)
        assert self.run(read_events(self.db)) == history + lost
        for delivery_id in expired:
            if delivery_id in perhaps_sent:
                event("a lease lost during an at-most-once call: FAILED ambiguous")
                moved = {"status": Status.FAILED, "failure_kind": AMBIGUOUS}
            else:
                moved = {"status": Status.PENDING, "next_attempt_at": self.now}
            self.model[delivery_id] = replace(self.model[delivery_id], lease_until=None, **moved)
        self.check_database()

    def scripted(self, delivery_id: uuid.UUID) -> Response:
        script = self.scripts[delivery_id]
        return script[min(self.sends[delivery_id], len(script) - 1)]

    def pending_times(self) -> Iterable[datetime]:
        for row in self.model.values():
            if row.status is Status.PENDING and row.next_attempt_at is not None:
                yield row.next_attempt_at

    def times(self) -> Iterable[datetime]:
        for row in self.model.values():
            if row.next_attempt_at is not None:
                yield row.next_attempt_at
            if row.lease_until is not None:
                yield row.lease_until

    # -- the invariants, checked after every store operation (so after every step) ---------

    def check_database(self) -> None:
        rows = self.run(read_rows(self.db))
        assert set(rows) == set(self.model)
        limit = self.policy.max_attempts
        for delivery_id, raw in rows.items():
            row = Row.of(raw)
            previous = self.seen.get(delivery_id)
            if previous is not None and previous is not row.status:
                assert can_move(previous, row.status), f"illegal {previous} -> {row.status}"
            self.seen[delivery_id] = row.status
            assert row == self.model[delivery_id]
            # Never more sends than attempts allowed, whatever crashed or was deferred.
            assert self.sends[delivery_id] <= limit
            assert row.attempts >= 0
            if row.status is Status.SENT or row.failure_kind in ("permanent", "poison"):
                assert row.attempts <= limit
            if row.failure_kind == "exhausted":
                assert row.attempts >= limit, "exhausted before the last attempt"
            if row.status is Status.FAILED:
                assert row.failure_kind in ENDINGS | {AMBIGUOUS}
            if row.failure_kind == AMBIGUOUS or row.started:
                # Only an at-most-once call leaves a mark, and only while it may be in
                # flight, or on the delivery it failed ambiguous.
                assert delivery_id in self.once
                assert row.status in (Status.SENDING, Status.FAILED), row
        assert all(call.attempt <= limit for call in self.provider.calls)


def test_delivery_state_machine(database_url: str) -> None:
    class OnThisDatabase(DeliveryMachine):
        url = database_url

    run_state_machine_as_test(
        OnThisDatabase,
        settings=settings(max_examples=60, stateful_step_count=50, deadline=None),
    )


# ---------------------------------------------------------------------------------------------
# Focused examples of the paths the machine must find


async def claim_one(db: Database, now: datetime) -> ClaimedDelivery:
    [claimed] = await claim_due(db, Priority.NORMAL, 10, now, now + LEASE)
    return claimed


async def test_lost_lease_on_the_last_attempt_fails_exhausted_without_a_send(
    database_url: str,
) -> None:
    db = connect(database_url)
    try:
        rules = TypeRules(RetryPolicy(max_attempts=1), None)
        await accept(db, [draft(Priority.NORMAL, "ana@example.com")], START)
        first = await claim_one(db, START)
        assert first.attempts == 1
        later = START + LEASE + timedelta(seconds=1)
        assert await reap_expired_leases(db, later) == 1  # the worker died mid-send
        second = await claim_one(db, later)
        assert second.attempts == 2

        outcome = precheck(second, rules, later)

        assert outcome is not None
        assert (outcome.status, outcome.failure_kind) == (Status.FAILED, "exhausted")
        await write_outcomes(db, [outcome], later)
        [row] = (await read_rows(db)).values()
        assert (row["status"], row["failure_kind"]) == ("FAILED", "exhausted")
    finally:
        await db.dispose()


async def test_a_stale_outcome_adds_no_event(database_url: str) -> None:
    db = connect(database_url)
    try:
        await accept(db, [draft(Priority.NORMAL, "ana@example.com")], START)
        stale = await claim_one(db, START)
        later = START + LEASE + timedelta(seconds=1)
        await reap_expired_leases(db, later)  # the first worker stalled past its lease
        fresh = await claim_one(db, later)
        await write_outcomes(
            db,
            [
                Outcome(
                    delivery_id=fresh.id,
                    claimed_attempts=fresh.attempts,
                    status=Status.SENT,
                    attempts=2,
                )
            ],
            later,
        )
        events_before = await read_events(db)

        # The stalled worker answers at last: its outcome is fenced off...
        await write_outcomes(db, [Outcome.failed(stale, FailureKind.PERMANENT, "late")], later)
        [row] = (await read_rows(db)).values()
        assert (row["status"], row["failure_kind"]) == ("SENT", None)
        # ...and must leave no trace: the history of a SENT delivery shows no "failed".
        assert await read_events(db) == events_before
    finally:
        await db.dispose()


# ---------------------------------------------------------------------------------------------
# End to end with the scripted test provider: the loop always finishes, with exact counts


def test_scripted_deliveries_finish_within_max_attempts(database_url: str) -> None:
    @settings(max_examples=40, deadline=None)
    @given(
        max_attempts=st.integers(min_value=1, max_value=5),
        scripts=st.lists(
            st.builds(
                Script,
                transient_failures=st.integers(min_value=0, max_value=6),
                permanent=st.booleans(),
                retry_after=st.none() | st.floats(min_value=0, max_value=600),
            ),
            min_size=1,
            max_size=5,
        ),
        rng=st.randoms(use_true_random=False),
    )
    def run(max_attempts: int, scripts: list[Script], rng: random.Random) -> None:
        asyncio.run(finish(database_url, max_attempts, scripts, rng))

    run()


async def finish(url: str, max_attempts: int, scripts: list[Script], rng: random.Random) -> None:
    db = connect(url)
    try:
        await clear(db)
        rules = TypeRules(RetryPolicy(max_attempts=max_attempts), None)
        provider = ScriptedProvider(
            scripts={f"user{i}@example.com": script for i, script in enumerate(scripts)}
        )
        sender = Sender(Composer(TemplateCatalog(db)), SEND_TIMEOUT, rng)
        drafts = [draft(Priority.NORMAL, f"user{i}@example.com") for i in range(len(scripts))]
        await accept(db, drafts, START)
        now = START
        for _ in range(max_attempts):
            claimed = await claim_due(db, Priority.NORMAL, 1000, now, now + LEASE)
            outcomes = []
            for item in claimed:
                outcome = precheck(item, rules, now)
                if outcome is None:
                    outcome = await sender.attempt(item, rules, Target(provider), now)
                outcomes.append(outcome)
            await write_outcomes(db, outcomes, now)
            rows = await read_rows(db)
            if not any(row["status"] == "PENDING" for row in rows.values()):
                break
            now = max(r["next_attempt_at"] for r in rows.values() if r["next_attempt_at"])
        rows = await read_rows(db)
        for i, script in enumerate(scripts):
            delivery_id = drafts[i].deliveries[0].id
            row = rows[delivery_id]
            expected: tuple[str, str | None, int]
            if script.permanent:
                expected = ("FAILED", "permanent", 1)
            elif script.transient_failures < max_attempts:
                expected = ("SENT", None, script.transient_failures + 1)
            else:
                expected = ("FAILED", "exhausted", max_attempts)
            assert (row["status"], row["failure_kind"], row["attempts"]) == expected
            assert provider.sends_of(delivery_id) == expected[2]
            assert all(call.attempt <= max_attempts for call in provider.calls)
    finally:
        await db.dispose()
