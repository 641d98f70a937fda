"""A tidings process SIGKILLed while it pushes events to a producer's endpoint loses none:
after a restart every event arrives (some twice, as the receiver can tell by webhook-id)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest
import standardwebhooks
from starlette.requests import Request
from starlette.responses import Response

from tests.helpers import eventually
from tests.integration.test_producer_webhooks import Receiver, receiving
from tests.processes import free_port, tidings_env, tidings_processes, wait_ready

TOTAL = 200


class SlowReceiver(Receiver):
    """Takes a while to answer, so that the kill finds messages in flight."""

    async def endpoint(self, request: Request) -> Response:
        await asyncio.sleep(0.02)
        return await super().endpoint(request)


@pytest.mark.slow
@pytest.mark.timeout(180)
async def test_a_killed_process_loses_no_event(tmp_path: Path) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = tidings_env(
        # Short leases: what the killed process held comes back within seconds.
        lease_seconds=2,
        reaper_interval=0.2,
        webhooks__allow_private="true",
        webhooks__lease_seconds=2,
        webhooks__poll_interval=0.05,
        webhooks__retry_delays=[0.1],
    )
    args = ["serve", "--port", str(port)]
    async with receiving(SlowReceiver()) as receiver:
        with tidings_processes(env, tmp_path) as processes:
            server = processes.start("serve", args)
            await wait_ready(base, server)
            async with httpx.AsyncClient(base_url=base) as client:
                secret = await setup(client, receiver)
                for n in range(TOTAL):
                    body = {"type": "order.confirmed", "to": {"email": f"u{n}@example.com"}}
                    answer = await client.post(
                        "/v1/notifications", json=body, headers={"Idempotency-Key": f"k{n}"}
                    )
                    assert answer.status_code == 202
            await eventually(lambda: len(receiver.unique()) >= TOTAL // 4, within=60)
            await server.kill_and_wait()
            before = len(receiver.unique())
            assert before < TOTAL, "the kill came too late to test anything"
            again = processes.start("serve-again", args)
            await wait_ready(base, again)
            await eventually(lambda: len(receiver.unique()) == TOTAL, within=90, interval=0.1)

    verifier = standardwebhooks.Webhook(secret)
    for headers, body in receiver.received:
        verifier.verify(body, headers)
    notifications = {e["data"]["notificationId"] for e in receiver.unique().values()}
    assert len(notifications) == TOTAL
    assert all(json.loads(b)["type"] == "delivery.sent" for _, b in receiver.received)


async def setup(client: httpx.AsyncClient, receiver: Receiver) -> str:
    kind = {"category": "transactional", "priority": "normal", "channels": ["email"]}
    assert (await client.put("/v1/types/order.confirmed", json=kind)).status_code == 201
    template = {"subject": "Order", "text": "Thanks."}
    url = "/v1/templates/order.confirmed/email/en"
    assert (await client.put(url, json=template)).status_code == 201
    made = await client.post(
        "/v1/webhook-endpoints", json={"url": receiver.url, "events": ["delivery.sent"]}
    )
    assert made.status_code == 201, made.text
    secret: str = made.json()["secret"]
    return secret
