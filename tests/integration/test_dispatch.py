"""The dispatcher: sends, retries, failure kinds, leases, shutdown, scheduled sends, expiry."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from tests.helpers import email_to, eventually, post, put_type, running_dispatcher
from tidings.clock import utcnow
from tidings.priorities import Priority
from tidings.providers.testing import Script, ScriptedProvider
from tidings.service import Service
from tidings.store.claims import claim_due
from tidings.store.schema import delivery

FAST_RETRY = {"baseDelay": 0.01, "maxDelay": 0.05, "maxAttempts": 4}


async def accept_one(
    client: httpx.AsyncClient, address: str = "ana@example.com", **extra: Any
) -> dict[str, Any]:
    response = await post(client, email_to(address, **extra))
    assert response.status_code == 202, response.text
    body: dict[str, Any] = response.json()
    return body


async def shown_delivery(client: httpx.AsyncClient, notification_id: str) -> dict[str, Any]:
    body = (await client.get(f"/v1/notifications/{notification_id}")).json()
    found: dict[str, Any] = body["deliveries"][0]
    return found


async def wait_status(
    client: httpx.AsyncClient, notification_id: str, status: str, within: float = 10
) -> dict[str, Any]:
    async def reached() -> dict[str, Any] | None:
        shown = await shown_delivery(client, notification_id)
        return shown if shown["status"] == status else None

    result: dict[str, Any] = await eventually(reached, within=within)
    return result


async def test_sends_and_records_provider_message_id(
    client: httpx.AsyncClient, service: Service
) -> None:
    await put_type(client)
    provider = ScriptedProvider()
    async with running_dispatcher(service, provider):
        accepted = await accept_one(client, data={"order": 42})
        shown = await wait_status(client, accepted["id"], "SENT")
    assert shown["providerMessageId"] == f"scripted-{shown['id']}"
    assert shown["attempts"] == 1
    assert [h["kind"] for h in shown["history"]] == ["accepted", "sent"]
    [call] = provider.completed
    assert call.address == "ana@example.com"


async def test_transient_failures_are_retried_then_sent(
    client: httpx.AsyncClient, service: Service
) -> None:
    await put_type(client, retry=FAST_RETRY)
    provider = ScriptedProvider(scripts={"ana@example.com": Script(transient_failures=2)})
    async with running_dispatcher(service, provider):
        accepted = await accept_one(client)
        shown = await wait_status(client, accepted["id"], "SENT")
    assert shown["attempts"] == 3
    kinds = [h["kind"] for h in shown["history"]]
    assert kinds == ["accepted", "retry_scheduled", "retry_scheduled", "sent"]
    assert len(provider.completed) == 3


async def test_permanent_failure_is_not_retried(
    client: httpx.AsyncClient, service: Service
) -> None:
    await put_type(client, retry=FAST_RETRY)
    provider = ScriptedProvider(scripts={"ana@example.com": Script(permanent=True)})
    async with running_dispatcher(service, provider):
        accepted = await accept_one(client)
        shown = await wait_status(client, accepted["id"], "FAILED")
        await asyncio.sleep(0.2)
    assert (shown["failureKind"], shown["attempts"]) == ("permanent", 1)
    assert "permanent" in shown["lastError"]
    assert len(provider.completed) == 1


async def test_transient_until_exhausted(client: httpx.AsyncClient, service: Service) -> None:
    await put_type(client, retry=FAST_RETRY)
    provider = ScriptedProvider(scripts={"ana@example.com": Script(transient_failures=99)})
    async with running_dispatcher(service, provider):
        accepted = await accept_one(client)
        shown = await wait_status(client, accepted["id"], "FAILED")
    assert (shown["failureKind"], shown["attempts"]) == ("exhausted", 4)
    assert len(provider.completed) == 4


async def test_retry_after_from_the_provider_wins(
    client: httpx.AsyncClient, service: Service
) -> None:
    await put_type(client, retry=FAST_RETRY)
    script = Script(transient_failures=1, retry_after=120)
    provider = ScriptedProvider(scripts={"ana@example.com": script})
    async with running_dispatcher(service, provider):
        before = utcnow()
        accepted = await accept_one(client)

        async def retried() -> dict[str, Any] | None:
            shown = await shown_delivery(client, accepted["id"])
            return shown if shown["lastError"] else None

        shown = await eventually(retried)
    assert shown["status"] == "PENDING"
    retry_at = datetime.fromisoformat(shown["nextAttemptAt"])
    assert timedelta(seconds=119) < retry_at - before < timedelta(seconds=125)


async def test_a_hanging_provider_times_out_as_transient(
    client: httpx.AsyncClient, service: Service
) -> None:
    service.settings.provider_timeout = 0.2
    await put_type(client, retry={"maxAttempts": 1})
    provider = ScriptedProvider(scripts={"ana@example.com": Script(hang=True)})
    async with running_dispatcher(service, provider):
        accepted = await accept_one(client)
        shown = await wait_status(client, accepted["id"], "FAILED")
    assert shown["failureKind"] == "exhausted"
    assert "did not answer within 0.2s" in shown["lastError"]


async def test_expired_lease_returns_the_delivery_and_it_is_sent(
    client: httpx.AsyncClient, service: Service
) -> None:
    await put_type(client)
    accepted = await accept_one(client)
    # A worker claims it and dies: its lease runs out.
    now = utcnow()
    [lost] = await claim_due(service.db, Priority.NORMAL, 10, now, now + timedelta(seconds=0.3))
    provider = ScriptedProvider()
    async with running_dispatcher(service, provider):
        shown = await wait_status(client, accepted["id"], "SENT")
    assert shown["attempts"] == 2
    assert "lease_expired" in [h["kind"] for h in shown["history"]]
    assert provider.sends_of(lost.id) == 1


async def test_deliveries_whose_attempts_died_with_workers_end_exhausted(
    client: httpx.AsyncClient, service: Service
) -> None:
    await put_type(client, retry={"maxAttempts": 2})
    accepted = await accept_one(client)
    for _ in range(2):  # two workers died holding it
        now = utcnow() + timedelta(seconds=5)
        await claim_due(service.db, Priority.NORMAL, 10, now, now)
        async with service.db.engine.begin() as conn:
            await conn.execute(sa.update(delivery).values(status="PENDING"))
    provider = ScriptedProvider()
    async with running_dispatcher(service, provider):
        shown = await wait_status(client, accepted["id"], "FAILED")
    assert shown["failureKind"] == "exhausted"
    assert provider.completed == []


async def test_shutdown_releases_in_flight_work_without_counting_it(
    client: httpx.AsyncClient, service: Service
) -> None:
    service.settings.shutdown_grace = 0.1
    await put_type(client)
    provider = ScriptedProvider(scripts={"ana@example.com": Script(hang=True)})
    async with running_dispatcher(service, provider):
        accepted = await accept_one(client)
        await eventually(lambda: provider.calls)
    shown = await shown_delivery(client, accepted["id"])
    assert (shown["status"], shown["attempts"]) == ("PENDING", 0)
    assert "released" in [h["kind"] for h in shown["history"]]


async def test_shutdown_lets_quick_sends_finish(
    client: httpx.AsyncClient, service: Service
) -> None:
    await put_type(client)
    provider = ScriptedProvider(delay=0.2)
    async with running_dispatcher(service, provider):
        accepted = await accept_one(client)
        await eventually(lambda: provider.calls)
    assert (await shown_delivery(client, accepted["id"]))["status"] == "SENT"


async def test_scheduled_send_waits_for_send_at(
    client: httpx.AsyncClient, service: Service
) -> None:
    await put_type(client)
    provider = ScriptedProvider()
    async with running_dispatcher(service, provider):
        send_at = datetime.now(UTC) + timedelta(seconds=0.6)
        accepted = await accept_one(client, sendAt=send_at.isoformat())
        await asyncio.sleep(0.3)
        assert provider.calls == []
        shown = await wait_status(client, accepted["id"], "SENT")
    assert datetime.fromisoformat(shown["sentAt"]) >= send_at


async def test_past_ttl_expires_instead_of_sending(
    client: httpx.AsyncClient, service: Service
) -> None:
    await put_type(client, ttl=1)
    accepted = await accept_one(client)
    async with service.db.engine.begin() as conn:
        await conn.execute(sa.update(delivery).values(created_at=utcnow() - timedelta(seconds=5)))
    provider = ScriptedProvider()
    async with running_dispatcher(service, provider):
        shown = await wait_status(client, accepted["id"], "EXPIRED")
    assert provider.calls == []
    assert "expired" in [h["kind"] for h in shown["history"]]
    # and the event feed has it, once (PostgreSQL shows an event once older transactions end)
    delivery_id = accepted["deliveries"][0]["id"]

    async def expired_events() -> list[dict[str, object]] | None:
        events = (await client.get("/v1/events")).json()["events"]
        return events or None

    [event] = await eventually(expired_events, within=10)
    assert event["type"] == "delivery.expired" and event["data"]["deliveryId"] == delivery_id


async def test_ttl_counts_from_the_scheduled_time(
    client: httpx.AsyncClient, service: Service
) -> None:
    await put_type(client, ttl=1)
    send_at = utcnow() + timedelta(seconds=2.5)
    accepted = await accept_one(client, sendAt=send_at.isoformat())
    async with running_dispatcher(service, ScriptedProvider()):
        shown = await wait_status(client, accepted["id"], "SENT")
    assert datetime.fromisoformat(shown["sentAt"]) >= send_at


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
async def test_several_dispatchers_never_send_a_delivery_twice(
    client: httpx.AsyncClient, settings: Any
) -> None:
    await put_type(client)
    items = [{"idempotencyKey": f"k{i}", **email_to(f"u{i}@example.com")} for i in range(600)]
    response = await client.post("/v1/notifications/batch", json={"notifications": items})
    assert response.status_code == 200
    provider = ScriptedProvider(delay=0.001)
    services = [Service.from_settings(settings) for _ in range(3)]
    try:
        async with (
            running_dispatcher(services[0], provider),
            running_dispatcher(services[1], provider),
            running_dispatcher(services[2], provider),
        ):
            await eventually(lambda: len(provider.completed) >= 600, within=30)
            await asyncio.sleep(0.3)
    finally:
        for extra in services:
            await extra.close()
    sent = [call.delivery_id for call in provider.completed]
    assert len(sent) == len(set(sent)) == 600


async def test_unknown_delivery_outcome_does_not_touch_other_rows(service: Service) -> None:
    # Writing an outcome for a delivery that is not SENDING changes nothing.
    from tidings.states import Status
    from tidings.store.outcomes import Outcome, write_outcomes

    await write_outcomes(
        service.db,
        [Outcome(delivery_id=uuid.uuid4(), claimed_attempts=1, status=Status.SENT, attempts=1)],
        utcnow(),
    )
    async with service.db.engine.connect() as conn:
        assert await conn.scalar(sa.select(sa.func.count()).select_from(delivery)) == 0


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
async def test_high_wakes_a_dispatcher_in_another_process_via_notify(
    client: httpx.AsyncClient, settings: Any
) -> None:
    await put_type(client, "otp", priority="high", channels=("email",))
    settings.lanes.high.poll_interval = 30  # only LISTEN/NOTIFY can wake it in time
    other = Service.from_settings(settings)  # its own Wakeup: like another process
    provider = ScriptedProvider()
    try:
        async with running_dispatcher(other, provider):
            await asyncio.sleep(0.5)  # let it connect, LISTEN and go idle
            started = asyncio.get_running_loop().time()
            response = await post(client, {"type": "otp", "to": {"email": "a@example.com"}})
            assert response.status_code == 202
            await eventually(lambda: provider.completed, within=5, interval=0.005)
            waited = asyncio.get_running_loop().time() - started
    finally:
        await other.close()
    assert waited < 2, f"HIGH waited {waited:.2f}s: the NOTIFY did not wake the lane"


async def test_a_stale_outcome_changes_nothing_and_leaves_no_event(
    client: httpx.AsyncClient, service: Service
) -> None:
    from tidings.states import FailureKind, Status
    from tidings.store.claims import reap_expired_leases
    from tidings.store.outcomes import Outcome, write_outcomes

    await put_type(client)
    accepted = await accept_one(client)
    now = utcnow()
    [stale] = await claim_due(service.db, Priority.NORMAL, 1, now, now + timedelta(seconds=1))
    later = now + timedelta(seconds=2)
    await reap_expired_leases(service.db, later)
    [fresh] = await claim_due(service.db, Priority.NORMAL, 1, later, later + timedelta(seconds=60))
    await write_outcomes(
        service.db,
        [
            Outcome(
                delivery_id=fresh.id,
                claimed_attempts=2,
                status=Status.SENT,
                attempts=2,
                sent_at=later,
            )
        ],
        later,
    )
    # The stalled first worker answers at last, together with an unrelated good outcome.
    await write_outcomes(service.db, [Outcome.failed(stale, FailureKind.PERMANENT, "late")], later)
    shown = await shown_delivery(client, accepted["id"])
    assert (shown["status"], shown["failureKind"]) == ("SENT", None)
    assert [h["kind"] for h in shown["history"]] == ["accepted", "lease_expired", "sent"]
