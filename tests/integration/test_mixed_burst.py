"""Valid and bad requests fired together, with random timings, at a real HTTP server: every
valid one is accepted, every bad one gets its 4xx naming the field, none is left waiting.

How fast they are answered is the benchmarks' business (bench/), not a test's: on a loaded
two-core runner a valid answer has taken over three seconds with nothing wrong."""

from __future__ import annotations

import asyncio
import json
import random
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import uvicorn

from tests.helpers import eventually, put_type
from tests.processes import free_port
from tidings.api.app import create_app
from tidings.service import Service

# A request stranded by a bad one (the group commit it joined failed and never answered)
# waits until this client timeout; an answered one, however slow, is well under it.
STRANDED_AFTER = 30.0

# (body changes, the status and field each gets): what reached a 500 and failed its group.
BAD: list[tuple[dict[str, Any], int, str]] = [
    ({"data": {"x": "\u0000"}}, 422, "data.x"),
    ({"data": {"x": "\ud800"}}, 422, "data.x"),
    ({"sendAt": "9999-12-31T23:59:59-14:00"}, 422, "sendAt"),
    ({"to": {"phone": "+15559990000\n"}, "channels": ["sms"]}, 422, "to.phone"),
    ({"locale": "en-" + "-".join(["abcdefgh"] * 30)}, 422, "locale"),
]


@pytest.fixture
async def server(service: Service) -> AsyncIterator[str]:
    port = free_port()
    config = uvicorn.Config(create_app(service), port=port, log_level="warning", lifespan="off")
    uv = uvicorn.Server(config)
    task = asyncio.create_task(uv.serve())
    await eventually(lambda: uv.started)
    yield f"http://127.0.0.1:{port}"
    uv.should_exit = True
    await task


async def _fire(
    client: httpx.AsyncClient, body: dict[str, Any], delay: float
) -> httpx.Response | None:
    await asyncio.sleep(delay)
    content = json.dumps(body).encode()  # ASCII: a lone surrogate travels as an escape
    headers = {"Idempotency-Key": str(uuid.uuid4()), "content-type": "application/json"}
    try:
        return await client.post("/v1/notifications", content=content, headers=headers)
    except httpx.TimeoutException:
        return None


async def test_bad_requests_never_harm_valid_ones(server: str) -> None:
    limits = httpx.Limits(max_connections=100)
    async with httpx.AsyncClient(base_url=server, timeout=STRANDED_AFTER, limits=limits) as client:
        await put_type(client, channels=("email", "sms"))
        for seed in range(4):
            rng = random.Random(seed)
            valid = [
                {"type": "order.confirmed", "to": {"email": f"u{seed}-{i}@example.com"}}
                for i in range(40)
            ]
            bad = [
                ({"type": "order.confirmed", "to": {"email": "b@example.com"}} | c, s, f)
                for c, s, f in BAD
            ]
            bodies = [(b, 202, None) for b in valid] + bad
            rng.shuffle(bodies)
            fired = [
                _fire(client, body, rng.choice([0, 0, 0.001, 0.005, 0.02])) for body, _, _ in bodies
            ]
            answers = await asyncio.gather(*fired)
            for (body, status, field), response in zip(bodies, answers, strict=True):
                assert response is not None, f"seed {seed}: left waiting: {body}"
                assert response.status_code == status, (seed, body, response.text)
                if status != 202:
                    assert response.json()["error"]["field"] == field, response.text
                    continue
                stored = await client.get(f"/v1/notifications/{response.json()['id']}")
                assert stored.status_code == 200, (seed, body, stored.text)
