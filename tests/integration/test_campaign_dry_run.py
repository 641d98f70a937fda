"""The dry run forecasts what the real run then does on the same data: per channel, how many
are sent, skipped and why (preference, suppression, no address, frequency cap), and how many
quiet hours defer; and it writes nothing."""

from __future__ import annotations

import uuid
from collections import Counter
from datetime import timedelta
from typing import Any

import httpx
import sqlalchemy as sa

from tests.helpers import eventually, put_type, running_dispatcher
from tests.integration.test_campaigns import MARKETING, post_campaign
from tidings.campaigns.dry_run import ChannelPlan, estimated_seconds
from tidings.clock import utcnow
from tidings.providers.testing import ScriptedProvider
from tidings.service import Service
from tidings.store import frequency
from tidings.store.schema import delivery, notification

USERS = [f"u{i:02d}" for i in range(40)]


async def the_data(client: httpx.AsyncClient, service: Service) -> None:
    """Every reason at once: see the comments for who is who."""
    await put_type(client, "presale", **MARKETING)
    now = utcnow()
    quiet = {"from": (now - timedelta(hours=1)).strftime("%H:%M"),
             "to": (now + timedelta(hours=2)).strftime("%H:%M")}  # fmt: skip
    for user_id in USERS:
        body = {"email": f"{user_id}@example.com", "timezone": "UTC"}
        assert (await client.put(f"/v1/users/{user_id}", json=body)).status_code == 201
    for user_id in USERS[:20]:  # u00-u19 have a device; the others' push has no address
        device = {"token": f"tok-{user_id}-aaaaaaaaaaaa", "userId": user_id, "platform": "android"}
        assert (await client.post("/v1/devices", json=device)).status_code == 201
    for user_id in USERS[1:5]:  # email switched off
        prefs = {"categories": {"marketing": {"email": False}}}
        assert (await client.put(f"/v1/users/{user_id}/preferences", json=prefs)).status_code == 200
    for user_id in USERS[5:7]:  # email suppressed
        put = await client.put(f"/v1/suppressions/email/{user_id}@example.com", json={})
        assert put.status_code == 200
    today = now.date()
    for user_id in USERS[7:10]:  # today's marketing allowance (3) used up
        await frequency.count_sends(service.db, [(user_id, "marketing", today, 3)] * 3)
    for user_id in USERS[10:13]:  # in quiet hours now: push waits, email does not
        answer = await client.put(f"/v1/users/{user_id}/preferences", json={"quietHours": quiet})
        assert answer.status_code == 200, answer.text


async def final_rows(service: Service) -> list[Any]:
    query = sa.select(delivery.c.channel, delivery.c.status, delivery.c.skip_reason)
    async with service.db.engine.connect() as conn:
        return list(await conn.execute(query))


async def test_the_dry_run_counts_equal_the_real_run(
    client: httpx.AsyncClient, service: Service
) -> None:
    await the_data(client, service)
    body = {"type": "presale", "audience": {"userIds": USERS}}
    dry = await post_campaign(client, body, dryRun="true")
    assert dry.status_code == 200, dry.text
    forecast = {c["channel"]: c for c in dry.json()["channels"]}
    assert dry.json()["audienceSize"] == 40
    async with service.db.engine.connect() as conn:  # the dry run wrote nothing
        assert (
            await conn.execute(sa.select(sa.func.count()).select_from(notification))
        ).scalar() == 0
        assert (await conn.execute(sa.text("SELECT count(*) FROM campaign"))).scalar() == 0
    assert sum(b["count"] for b in dry.json()["histogram"]) == sum(
        c["wouldSend"] for c in forecast.values()
    )

    campaign_id = (await post_campaign(client, body, key=str(uuid.uuid4()))).json()["campaignId"]

    async def settled() -> list[Any] | None:
        found = await final_rows(service)
        waiting = [r for r in found if r.status in ("PENDING", "SENDING")]
        # Only the quiet-hours pushes may wait (until the window's end).
        return (
            found
            if len(found) == 80 and len(waiting) == 3 and all(r.channel == "push" for r in waiting)
            else None
        )

    async with running_dispatcher(service, ScriptedProvider()):
        found = await eventually(settled, within=20, interval=0.1)
    for channel in ("email", "push"):
        mine = [r for r in found if r.channel == channel]
        sent = sum(r.status == "SENT" for r in mine)
        deferred = sum(r.status == "PENDING" for r in mine)
        skipped = Counter(r.skip_reason for r in mine if r.status == "SKIPPED")
        assert forecast[channel]["deliveries"] == len(mine)
        assert forecast[channel]["wouldSend"] == sent + deferred, channel
        assert forecast[channel]["deferredByQuietHours"] == deferred, channel
        assert forecast[channel]["skipped"] == dict(skipped), channel
    # And the numbers themselves, so that equal-but-wrong cannot pass.
    assert forecast["email"]["skipped"] == {
        "preference_off": 4, "suppressed": 2, "frequency_cap": 3
    }  # fmt: skip
    assert forecast["push"]["skipped"] == {"no_address": 20, "frequency_cap": 3}
    assert forecast["push"]["deferredByQuietHours"] == 3
    assert forecast["email"]["wouldSend"] == 31 and forecast["push"]["wouldSend"] == 17
    status = (await client.get(f"/v1/campaigns/{campaign_id}")).json()
    assert status["deliveries"] == 80


def test_estimated_duration_is_the_window_or_the_accounts_pace() -> None:
    # 600 sends at 10/s with LOW's 60 % share take 100 s, more than a 60 s window.
    assert estimated_seconds(ChannelPlan(would_send=600), 10, 0.6, 60) == 100.0
    assert estimated_seconds(ChannelPlan(would_send=60), 10, 0.6, 60) == 60.0
    assert estimated_seconds(ChannelPlan(would_send=600), None, 0.6, 60) == 60.0
    assert estimated_seconds(ChannelPlan(would_send=0), 10, 0.6, 60) == 0.0
