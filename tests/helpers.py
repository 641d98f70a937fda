"""Small helpers shared by the tests: registering types, posting, running a dispatcher."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx

from tidings.assembly import assemble_dispatcher
from tidings.dispatch.dispatcher import Dispatcher
from tidings.priorities import Channel
from tidings.providers.base import Provider
from tidings.service import Service


async def put_type(
    client: httpx.AsyncClient,
    name: str = "order.confirmed",
    *,
    category: str = "transactional",
    priority: str = "normal",
    channels: tuple[str, ...] = ("email", "sms", "push"),
    templates: bool = True,
    **extra: Any,
) -> None:
    """Register a type and, unless ``templates=False``, a plain template per channel."""
    body = {"category": category, "priority": priority, "channels": list(channels), **extra}
    response = await client.put(f"/v1/types/{name}", json=body)
    assert response.status_code in (200, 201), response.text
    if templates:
        await put_templates(client, name, channels)


# A template per channel that renders any data: most tests are about delivery, not words.
PLAIN_TEMPLATES: dict[str, dict[str, Any]] = {
    "email": {"subject": "Hello", "text": "data: {{ data | tojson }}"},
    "sms": {"text": "data: {{ data | tojson }}"},
    "push": {"subject": "Hello", "text": "data: {{ data | tojson }}"},
    # An approved template (the simulator's order_update), its one parameter the data.
    "whatsapp": {
        "data": {"template": "order_update", "language": "en_US", "1": "{{ data | tojson }}"}
    },
}


async def put_templates(
    client: httpx.AsyncClient, name: str, channels: tuple[str, ...], locale: str = "en"
) -> None:
    for channel in channels:
        url = f"/v1/templates/{name}/{channel}/{locale}"
        response = await client.put(url, json=PLAIN_TEMPLATES[channel])
        assert response.status_code in (200, 201), response.text


async def post(
    client: httpx.AsyncClient, body: dict[str, Any], key: str | None = None
) -> httpx.Response:
    headers = {"Idempotency-Key": key or str(uuid.uuid4())}
    return await client.post("/v1/notifications", json=body, headers=headers)


def email_to(address: str = "ana@example.com", **extra: Any) -> dict[str, Any]:
    return {"type": "order.confirmed", "to": {"email": address}, "channels": ["email"], **extra}


@contextlib.asynccontextmanager
async def running_dispatcher(service: Service, provider: Provider) -> AsyncIterator[Dispatcher]:
    """A dispatcher sending every channel through ``provider``, stopped on exit."""
    dispatcher = assemble_dispatcher(service, {channel: provider for channel in Channel})
    stop = asyncio.Event()
    task = asyncio.create_task(dispatcher.run(stop))
    try:
        yield dispatcher
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=30)


async def eventually(check: Callable[[], Any], within: float = 10.0, interval: float = 0.02) -> Any:
    """Poll the (async or sync) ``check`` until it returns something truthy."""
    deadline = time.monotonic() + within
    while True:
        result = check()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {within}s (last: {result!r})")
        await asyncio.sleep(interval)


async def delivery_statuses(client: httpx.AsyncClient, notification_id: str) -> list[str]:
    response = await client.get(f"/v1/notifications/{notification_id}")
    assert response.status_code == 200, response.text
    return [d["status"] for d in response.json()["deliveries"]]


def windows(times: list[float]) -> list[int]:
    """Sends in every one-second window starting at a send (sliding windows)."""
    times = sorted(times)
    counts, end = [], 0
    for start, at in enumerate(times):
        while end < len(times) and times[end] < at + 1.0:
            end += 1
        counts.append(end - start)
    return counts
