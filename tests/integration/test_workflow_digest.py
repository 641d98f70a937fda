"""Digests (issue 26, item 3): notifications of one type, user and rendered key within the
window become one; the steps after run once per digest, on the notification that opened
it, whose templates see digest.count and digest.items; a late arrival starts the next;
runners racing for one group make one digest. Both databases."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import httpx

from tests.helpers import eventually, post, running_dispatcher
from tidings.providers.base import Message, SendResult
from tidings.service import Service
from tidings.workflows.runner import StepRunner


def _digest_workflow(window: str = "1s", most: int = 50) -> list[dict[str, Any]]:
    return [{"digest": {"window": window, "key": "{{ thread }}", "max": most}}, {"send": "email"}]


async def _digest_type(client: httpx.AsyncClient, workflow: list[dict[str, Any]]) -> None:
    body = {
        "category": "reminder",
        "priority": "normal",
        "channels": ["email"],
        "workflow": workflow,
    }
    response = await client.put("/v1/types/comment.new", json=body)
    assert response.status_code in (200, 201), response.text
    template = {
        "subject": "{{ digest.count }} new comments",
        "text": "{% for item in digest['items'] %}{{ item.n }};{% endfor %}",
    }
    put = await client.put("/v1/templates/comment.new/email/en", json=template)
    assert put.status_code in (200, 201), put.text


async def _comment(client: httpx.AsyncClient, user: str, thread: str, n: int) -> str:
    data = {"thread": thread, "n": n}
    to = {"email": f"{user}@example.com"}
    body = {"type": "comment.new", "userId": user, "to": to, "data": data}
    response = await post(client, body)
    assert response.status_code == 202, response.text
    notification_id: str = response.json()["id"]
    return notification_id


async def _read(client: httpx.AsyncClient, notification_id: str) -> dict[str, Any]:
    body: dict[str, Any] = (await client.get(f"/v1/notifications/{notification_id}")).json()
    return body


def _runner(service: Service, batch: int = 100) -> StepRunner:
    return StepRunner(service.db, lambda _priority: None, batch=batch)


async def _sends(client: httpx.AsyncClient, ids: list[str]) -> dict[str, int]:
    return {i: len((await _read(client, i))["deliveries"]) for i in ids}


async def test_a_burst_becomes_one_digest_per_user_and_key(
    client: httpx.AsyncClient, service: Service
) -> None:
    await _digest_type(client, _digest_workflow("1s"))
    ana_t1 = [await _comment(client, "ana", "t1", n) for n in range(5)]
    ana_t2 = [await _comment(client, "ana", "t2", n) for n in range(2)]
    bob_t1 = [await _comment(client, "bob", "t1", 9)]
    runner = _runner(service)
    assert await runner.round() == 8
    opened = await _read(client, ana_t1[0])
    assert [s["state"] for s in opened["steps"]] == ["PENDING", "WAITING"]
    joined = await _read(client, ana_t1[1])
    assert [(s["state"], s["skipReason"]) for s in joined["steps"]] == [
        ("DONE", "digested"),
        ("SKIPPED", "digested"),
    ]
    everyone = ana_t1 + ana_t2 + bob_t1

    async def three_sent() -> bool:
        await runner.round()
        return sum((await _sends(client, everyone)).values()) == 3

    await eventually(three_sent, within=10, interval=0.1)
    sent = await _sends(client, everyone)
    assert [i for i, n in sent.items() if n] == [ana_t1[0], ana_t2[0], bob_t1[0]]

    # After the close, a late comment on t1 starts the next digest.
    late = await _comment(client, "ana", "t1", 5)
    await eventually(lambda: _has_delivery(client, runner, late), within=10, interval=0.1)
    assert sum((await _sends(client, everyone)).values()) == 3


async def _has_delivery(
    client: httpx.AsyncClient, runner: StepRunner, notification_id: str
) -> bool:
    await runner.round()
    return bool((await _read(client, notification_id))["deliveries"])


async def test_a_full_digest_closes_at_once_and_the_next_one_opens(
    client: httpx.AsyncClient, service: Service
) -> None:
    await _digest_type(client, _digest_workflow("1h", most=2))
    ids = [await _comment(client, "ana", "t1", n) for n in range(3)]
    runner = _runner(service)
    await runner.round()  # 0 opens, 1 joins (full: 0 due now), 2 opens the next
    await runner.round()  # 0 closes
    await runner.round()  # 0 sends
    assert await _sends(client, ids) == {ids[0]: 1, ids[1]: 0, ids[2]: 0}
    assert (await _read(client, ids[2]))["steps"][0]["state"] == "PENDING"  # its hour


@dataclass
class _Capture:
    name: str = "capture"
    texts: list[tuple[str | None, str]] = field(default_factory=list)

    async def send(self, message: Message) -> SendResult:
        self.texts.append((message.content.subject, message.content.text))
        return SendResult(provider=self.name, provider_msg_id=str(message.delivery_id))

    async def close(self) -> None:
        return None


async def test_templates_see_the_count_and_the_items_oldest_first(
    client: httpx.AsyncClient, service: Service
) -> None:
    await _digest_type(client, _digest_workflow("1s"))
    for n in (1, 2, 3):
        await _comment(client, "ana", "t1", n)
    capture = _Capture()
    async with running_dispatcher(service, capture):
        await eventually(lambda: capture.texts, within=15, interval=0.1)
        await asyncio.sleep(0.5)  # nothing more comes
    assert capture.texts == [("3 new comments", "1;2;3;")]


async def test_racing_runners_make_one_digest(client: httpx.AsyncClient, service: Service) -> None:
    # A long window (a slow machine cannot outlast it), closed by reaching max.
    await _digest_type(client, _digest_workflow("1h", most=20))
    ids = [await _comment(client, "ana", "t1", n) for n in range(20)]
    runners = [_runner(service, batch=3) for _ in range(4)]
    for _ in range(4):
        await asyncio.gather(*(runner.round() for runner in runners))

    async def all_ran() -> bool:
        await asyncio.gather(*(runner.round() for runner in runners))
        steps = [(await _read(client, i))["steps"] for i in ids]
        return all(s[1]["state"] in ("DONE", "SKIPPED") for s in steps)

    await eventually(all_ran, within=15, interval=0.1)
    sent = await _sends(client, ids)
    assert sum(sent.values()) == 1


async def test_a_key_that_does_not_render_refuses_the_notification(
    client: httpx.AsyncClient,
) -> None:
    await _digest_type(client, _digest_workflow())
    to = {"email": "ana@example.com"}
    body = {"type": "comment.new", "userId": "ana", "to": to, "data": {"n": 1}}
    response = await post(client, body)
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["field"] == "data"
    assert "thread" in error["message"]
    anonymous = await post(client, {"type": "comment.new", "to": to, "data": {"thread": "t"}})
    assert anonymous.status_code == 422
    assert anonymous.json()["error"]["field"] == "userId"


async def _events(client: httpx.AsyncClient, types: str) -> list[dict[str, Any]]:
    response = await client.get("/v1/events", params={"types": types, "limit": 100})
    assert response.status_code == 200, response.text
    found: list[dict[str, Any]] = response.json()["events"]
    return found


async def test_the_event_log_has_each_step_and_the_close(
    client: httpx.AsyncClient, service: Service
) -> None:
    await _digest_type(client, _digest_workflow("1s"))
    ids = [await _comment(client, "ana", "t1", n) for n in range(3)]
    runner = _runner(service)

    async def sent() -> bool:
        await runner.round()
        return bool((await _read(client, ids[0]))["deliveries"])

    await eventually(sent, within=10, interval=0.1)

    async def logged() -> list[dict[str, Any]]:
        found = await _events(client, "digest.closed")
        return found if found else []

    [closed] = await eventually(logged, within=10)
    assert closed["data"]["notificationId"] == ids[0]
    assert closed["data"]["count"] == 3
    expected = sorted(
        [(ids[0], 0, None), (ids[0], 1, None), (ids[1], 0, "digested"), (ids[2], 0, "digested")]
    )

    async def ended() -> list[tuple[str, int, str | None]]:
        # PostgreSQL shows an event once no older transaction runs (docs/events.md).
        completed = await _events(client, "step.completed")
        return sorted(
            (e["data"]["notificationId"], e["data"]["index"], e["data"].get("skipReason"))
            for e in completed
        )

    await eventually(lambda: _equal(ended, expected), within=10)


async def _equal(read: Any, expected: Any) -> bool:
    return bool(await read() == expected)
