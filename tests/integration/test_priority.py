"""Urgent stays fast: a HIGH notification is not queued behind a LOW flood (docs/architecture.md,
Lanes and reserved rate shares)."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from tests.helpers import eventually, post, put_type, running_dispatcher
from tidings.dispatch.lanes.settings import Lanes
from tidings.providers.testing import ScriptedProvider
from tidings.service import Service

LOW_FLOOD = 20_000
SEND_SECONDS = 0.020
MAX_LOW_SENDS_BEFORE_HIGH = 50


async def flood_low(client: httpx.AsyncClient, count: int) -> None:
    for start in range(0, count, 1000):
        items = [
            {
                "idempotencyKey": f"promo-{i}",
                "type": "promo",
                "to": {"email": f"fan{i}@example.com"},
            }
            for i in range(start, min(start + 1000, count))
        ]
        response = await client.post("/v1/notifications/batch", json={"notifications": items})
        assert response.status_code == 200
        assert all(r["status"] == "accepted" for r in response.json()["results"])


@pytest.mark.slow
async def test_high_is_sent_before_50_more_low_sends(
    client: httpx.AsyncClient, service: Service
) -> None:
    service.settings.lanes = Lanes()  # the shipped defaults, not the test fixture's
    await put_type(client, "promo", category="marketing", priority="low", channels=("email",))
    await put_type(client, "otp", priority="high", channels=("sms",))
    await flood_low(client, LOW_FLOOD)
    provider = ScriptedProvider(delay=SEND_SECONDS)
    async with running_dispatcher(service, provider):
        await eventually(lambda: len(provider.completed) >= 200, within=30)
        overtaken = []
        for attempt in range(3):
            # Sends started, not completed: the LOW sends in flight when HIGH arrives, and
            # those finishing during HIGH's own send, are not overtaking it; a machine that
            # stalls (a loaded CI runner's fsync) stalls the LOW claims as well.
            low_started_at_accept = len(provider.calls)
            response = await post(
                client, {"type": "otp", "to": {"phone": "+5511912345678"}}, key=f"otp-{attempt}"
            )
            assert response.status_code == 202
            high_id = response.json()["deliveries"][0]["id"]

            def high_started(high_id: str = high_id) -> int | None:
                for position, call in enumerate(provider.calls):
                    if str(call.delivery_id) == high_id:
                        return position
                return None

            position = await eventually(high_started, within=10, interval=0.001)
            low_between = [
                c for c in provider.calls[low_started_at_accept:position] if c.priority == "low"
            ]
            overtaken.append(len(low_between))
            await asyncio.sleep(0.2)
        remaining_low = LOW_FLOOD - len(provider.completed)
    print(f"LOW sends started between HIGH accept and HIGH start: {overtaken}")
    assert remaining_low > 0, "the LOW flood must still be running when HIGH arrives"
    assert max(overtaken) < MAX_LOW_SENDS_BEFORE_HIGH
