"""Workflow steps run on the durable core (issue 26, items 1-3): a step row per step at
accept, claimed and fenced like deliveries, time from the database; send, wait, unless,
cancellation by key and the engagement call; on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime, timedelta
from typing import Any

import httpx
import sqlalchemy as sa

from tests.helpers import eventually, post, put_templates, running_dispatcher
from tidings.providers.testing import ScriptedProvider
from tidings.service import Service
from tidings.store.schema import delivery
from tidings.store.workflow_steps import (
    Completion,
    StepState,
    claim_due,
    complete,
    database_now,
)
from tidings.workflows.runner import StepRunner

ESCALATE = [{"send": "email"}, {"wait": "1s"}, {"send": "sms", "unless": "email:opened"}]


async def _workflow_type(client: httpx.AsyncClient, workflow: list[Any] = ESCALATE) -> None:
    body = {
        "category": "reminder",
        "priority": "normal",
        "channels": ["email", "sms"],
        "workflow": workflow,
    }
    response = await client.put("/v1/types/pay.reminder", json=body)
    assert response.status_code in (200, 201), response.text
    await put_templates(client, "pay.reminder", ("email", "sms"))


def _notification(**extra: Any) -> dict[str, Any]:
    to = {"email": "ana@example.com", "phone": "+15550001111"}
    return {"type": "pay.reminder", "to": to, **extra}


async def _accepted(client: httpx.AsyncClient, **extra: Any) -> str:
    response = await post(client, _notification(**extra))
    assert response.status_code == 202, response.text
    notification_id: str = response.json()["id"]
    return notification_id


async def _read(client: httpx.AsyncClient, notification_id: str) -> dict[str, Any]:
    response = await client.get(f"/v1/notifications/{notification_id}")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _states(body: dict[str, Any]) -> list[str]:
    return [step["state"] for step in body["steps"]]


def _channels(body: dict[str, Any]) -> list[str]:
    return sorted(d["channel"] for d in body["deliveries"])


def _runner(service: Service) -> StepRunner:
    return StepRunner(service.db, lambda _priority: None)


async def test_steps_run_in_order_and_the_wait_holds(
    client: httpx.AsyncClient, service: Service
) -> None:
    await _workflow_type(client)
    notification_id = await _accepted(client)
    accepted = await _read(client, notification_id)
    assert accepted["deliveries"] == []  # the send steps make them
    assert _states(accepted) == ["PENDING", "WAITING", "WAITING"]

    runner = _runner(service)
    assert await runner.round() == 1  # the email send
    after_send = await _read(client, notification_id)
    assert _channels(after_send) == ["email"]
    assert after_send["deliveries"][0]["status"] == "PENDING"
    assert await runner.round() == 1  # the wait starts
    waiting = await _read(client, notification_id)
    assert _states(waiting) == ["DONE", "DONE", "PENDING"]
    assert await runner.round() == 0  # due a second later, not before
    assert _channels(await _read(client, notification_id)) == ["email"]

    await eventually(runner.round, within=5)
    done = await _read(client, notification_id)
    assert _states(done) == ["DONE", "DONE", "DONE"]
    assert _channels(done) == ["email", "sms"]
    wait_ran, sms_ran = done["steps"][1]["ranAt"], done["steps"][2]["ranAt"]
    assert _seconds(sms_ran) - _seconds(wait_ran) >= 1.0


def _seconds(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


async def test_an_open_reported_during_the_wait_skips_the_sms(
    client: httpx.AsyncClient, service: Service
) -> None:
    await _workflow_type(client)
    notification_id = await _accepted(client)
    runner = _runner(service)
    await runner.round()
    await runner.round()
    email = (await _read(client, notification_id))["deliveries"][0]
    opened = await client.post(f"/v1/deliveries/{email['id']}/engagement", json={"event": "opened"})
    assert opened.status_code == 202, opened.text

    await eventually(runner.round, within=5)
    body = await _read(client, notification_id)
    assert _states(body) == ["DONE", "DONE", "SKIPPED"]
    assert body["steps"][2]["skipReason"] == "engaged"
    assert _channels(body) == ["email"]
    history = [entry["kind"] for entry in body["deliveries"][0]["history"]]
    assert "opened" in history


async def test_a_click_counts_as_opened_and_other_channels_do_not(
    client: httpx.AsyncClient, service: Service
) -> None:
    await _workflow_type(client, [{"send": "email"}, {"send": "sms", "unless": "email:opened"}])
    clicked_id = await _accepted(client)
    untouched_id = await _accepted(client)
    runner = _runner(service)
    await runner.round()  # both emails
    email = (await _read(client, clicked_id))["deliveries"][0]
    clicked = await client.post(
        f"/v1/deliveries/{email['id']}/engagement", json={"event": "clicked"}
    )
    assert clicked.status_code == 202
    await runner.round()
    assert _channels(await _read(client, clicked_id)) == ["email"]
    assert _channels(await _read(client, untouched_id)) == ["email", "sms"]


async def test_cancel_by_key_ends_pending_steps_and_answers_how_many(
    client: httpx.AsyncClient, service: Service
) -> None:
    await _workflow_type(client)
    paid = [await _accepted(client, cancelKey="invoice-7") for _ in range(2)]
    other = await _accepted(client, cancelKey="invoice-8")
    runner = _runner(service)
    await runner.round()  # the three emails go
    answer = await client.post("/v1/notifications/cancel", json={"cancelKey": "invoice-7"})
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"cancelled": 2}
    again = await client.post("/v1/notifications/cancel", json={"cancelKey": "invoice-7"})
    assert again.json() == {"cancelled": 0}

    await eventually(lambda: _all_done(client, runner, other), within=5, interval=0.05)
    for notification_id in paid:
        body = await _read(client, notification_id)
        assert _states(body) == ["DONE", "CANCELLED", "CANCELLED"]
        assert _channels(body) == ["email"]
    assert _channels(await _read(client, other)) == ["email", "sms"]


async def _all_done(client: httpx.AsyncClient, runner: StepRunner, notification_id: str) -> bool:
    await runner.round()
    return _states(await _read(client, notification_id)) == ["DONE", "DONE", "DONE"]


async def test_a_lost_lease_is_fenced_out_and_the_send_made_once(
    client: httpx.AsyncClient, service: Service
) -> None:
    await _workflow_type(client, [{"send": "email"}])
    notification_id = await _accepted(client)
    now = await database_now(service.db)
    [first] = await claim_due(service.db, now, now + timedelta(seconds=1), 10)
    # The first runner stalls past its lease; another claims the step again.
    later = now + timedelta(seconds=2)
    [second] = await claim_due(service.db, later, later + timedelta(seconds=60), 10)
    assert (first.id, first.attempts, second.attempts) == (second.id, 1, 2)
    sent = Completion(StepState.DONE, insert_deliveries=True, ends=True)
    assert await complete(service.db, second, sent, later)
    assert not await complete(service.db, first, sent, later)  # its fence fails
    assert not await complete(service.db, second, sent, later)  # and nothing runs twice
    async with service.db.engine.connect() as conn:
        count = await conn.scalar(
            sa.select(sa.func.count())
            .select_from(delivery)
            .where(delivery.c.notification_id == uuid.UUID(notification_id))
        )
    assert count == 1


async def test_steps_survive_a_runner_that_died_mid_step(
    client: httpx.AsyncClient, service: Service
) -> None:
    await _workflow_type(client, [{"send": "email"}])
    notification_id = await _accepted(client)
    now = await database_now(service.db)
    await claim_due(service.db, now, now + timedelta(seconds=2), 10)  # and died
    runner = _runner(service)
    assert await runner.round() == 0  # leased: not taken while the lease holds
    await eventually(runner.round, within=10)
    body = await _read(client, notification_id)
    assert body["steps"][0]["attempts"] == 2
    assert _channels(body) == ["email"]


async def test_a_dispatcher_runs_the_steps_and_sends_through_the_pipeline(
    client: httpx.AsyncClient, service: Service
) -> None:
    await _workflow_type(client)
    provider = ScriptedProvider()
    notification_id = await _accepted(client)
    async with running_dispatcher(service, provider):

        async def both_sent() -> bool:
            body = await _read(client, notification_id)
            return [d["status"] for d in body["deliveries"]] == ["SENT", "SENT"]

        await eventually(both_sent, within=15, interval=0.1)
    assert sorted(call.address for call in provider.completed) == [
        "+15550001111",
        "ana@example.com",
    ]


async def test_cancel_key_needs_a_workflow_and_a_throttle_a_user(
    client: httpx.AsyncClient,
) -> None:
    plain = {"category": "reminder", "priority": "normal", "channels": ["email", "sms"]}
    assert (await client.put("/v1/types/pay.reminder", json=plain)).status_code == 201
    await put_templates(client, "pay.reminder", ("email", "sms"))
    refused = await post(client, _notification(cancelKey="k"))
    assert refused.status_code == 422
    assert refused.json()["error"]["field"] == "cancelKey"

    throttle = {"throttle": {"limit": 1, "window": "1h"}}
    await _workflow_type(client, [throttle, {"send": "email"}])
    anonymous = await post(client, _notification())
    assert anonymous.status_code == 422
    assert anonymous.json()["error"]["field"] == "userId"


async def test_engagement_call_checks_its_input(client: httpx.AsyncClient) -> None:
    url = f"/v1/deliveries/{uuid.uuid4()}/engagement"
    unknown = await client.post(url, json={"event": "opened"})
    assert unknown.status_code == 404
    bad = await client.post(url, json={"event": "liked"})
    assert bad.status_code == 422
    assert bad.json()["error"]["field"] == "event"
    empty = await client.post("/v1/notifications/cancel", json={"cancelKey": ""})
    assert empty.status_code == 422
    assert empty.json()["error"]["field"] == "cancelKey"


async def test_a_type_without_workflow_is_sent_at_once(client: httpx.AsyncClient) -> None:
    plain = {"category": "reminder", "priority": "normal", "channels": ["email", "sms"]}
    assert (await client.put("/v1/types/pay.reminder", json=plain)).status_code == 201
    await put_templates(client, "pay.reminder", ("email", "sms"))
    notification_id = await _accepted(client)
    body = await _read(client, notification_id)
    assert _channels(body) == ["email", "sms"]
    assert body["steps"] is None


async def test_a_throttle_lets_the_limit_through_per_user_and_key(
    client: httpx.AsyncClient, service: Service
) -> None:
    throttle = {"throttle": {"limit": 2, "window": "1h", "key": "{{ invoice }}"}}
    await _workflow_type(client, [throttle, {"send": "email"}])

    async def accepted(user: str, invoice: int) -> str:
        return await _accepted(client, userId=user, data={"invoice": invoice})

    ana_7 = [await accepted("ana", 7) for _ in range(4)]
    ana_8 = await accepted("ana", 8)
    bob_7 = await accepted("bob", 7)
    runners = [_runner(service) for _ in range(3)]  # racing for the same group
    for _ in range(3):
        await asyncio.gather(*(runner.round() for runner in runners))
    sent = [len((await _read(client, i))["deliveries"]) for i in ana_7]
    assert sorted(sent) == [0, 0, 1, 1]
    for notification_id in ana_7:
        body = await _read(client, notification_id)
        if not body["deliveries"]:
            assert [(s["state"], s["skipReason"]) for s in body["steps"]] == [
                ("SKIPPED", "throttled"),
                ("SKIPPED", "throttled"),
            ]
    assert _channels(await _read(client, ana_8)) == ["email"]
    assert _channels(await _read(client, bob_7)) == ["email"]
