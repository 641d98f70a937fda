"""Frequency caps: per user and category per local day, counted atomically when sent."""

from __future__ import annotations

import asyncio
import random
import uuid
from datetime import UTC, datetime, timedelta

import httpx

from tests.helpers import eventually, post, put_type, running_dispatcher
from tidings.dispatch.pipeline.retry import RetryPolicy
from tidings.dispatch.pipeline.send_checks import SendTimeChecks
from tidings.dispatch.pipeline.types import TypeRules
from tidings.providers.testing import ScriptedProvider
from tidings.service import Service
from tidings.store.claims import ClaimedDelivery
from tidings.store.frequency import count_sends


async def test_marketing_beyond_three_a_day_is_skipped(
    client: httpx.AsyncClient, service: Service
) -> None:
    await put_type(client, "promo", category="marketing", priority="low", channels=("email",))
    await put_type(client, "receipt", channels=("email",))
    to = {"email": "fan@example.com"}
    promos = [
        (await post(client, {"type": "promo", "userId": "fan", "to": to})).json() for _ in range(5)
    ]
    receipts = [
        (await post(client, {"type": "receipt", "userId": "fan", "to": to})).json()
        for _ in range(5)
    ]
    provider = ScriptedProvider()
    async with running_dispatcher(service, provider):
        await eventually(lambda: len(provider.completed) >= 8)
        await asyncio.sleep(0.3)
    assert len(provider.completed) == 8  # 3 promos and all 5 receipts

    async def status(body: dict[str, str]) -> tuple[str, str | None]:
        shown = (await client.get(f"/v1/notifications/{body['id']}")).json()["deliveries"][0]
        return shown["status"], shown["skipReason"]

    promo_statuses = sorted([await status(p) for p in promos], key=str)
    assert promo_statuses == [("SENT", None)] * 3 + [("SKIPPED", "frequency_cap")] * 2
    assert {await status(r) for r in receipts} == {("SENT", None)}


async def test_racing_dispatchers_cannot_both_take_the_last_slot(service: Service) -> None:
    day = datetime(2026, 11, 30).date()
    await count_sends(service.db, [("fan", "marketing", day, 3)] * 2)
    races = await asyncio.gather(
        *(count_sends(service.db, [("fan", "marketing", day, 3)]) for _ in range(10))
    )
    assert sum(ok for [ok] in races) == 1


async def test_the_cap_is_per_local_day(client: httpx.AsyncClient, service: Service) -> None:
    await client.put("/v1/users/fan/preferences", json={"timezone": "Asia/Tokyo"})
    checks = SendTimeChecks(
        service.db,
        lambda _: TypeRules(RetryPolicy(), None),
        random.Random(0),
        caps={"marketing": 1},
    )

    def claimed() -> ClaimedDelivery:
        return ClaimedDelivery(
            id=uuid.uuid4(),
            notification_id=uuid.uuid4(),
            channel="email",
            address="fan@example.com",
            priority="low",
            category="marketing",
            attempts=1,
            created_at=datetime.now(UTC),
            type="promo",
            data={},
            locale=None,
            user_id="fan",
        )

    # 23:30 in Tokyo on the 30th, then 00:30 on the 1st: two local days, an hour apart.
    late = datetime(2026, 11, 30, 14, 30, tzinfo=UTC)
    send, held = await checks.apply([claimed(), claimed()], late)
    assert (len(send), [o.skip_reason for o in held]) == (1, ["frequency_cap"])
    send, held = await checks.apply([claimed()], late + timedelta(hours=1))
    assert (len(send), held) == (1, [])
