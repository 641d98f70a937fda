"""A 100,000-subscriber campaign spread over 30 minutes, expanded for real on PostgreSQL:
the planned send times are uniform (per-minute counts within 10 % of the mean)."""

from __future__ import annotations

import uuid
from collections import Counter
from datetime import timedelta

import httpx
import pytest
import sqlalchemy as sa

from tests.helpers import put_type
from tests.integration.test_campaigns import EMAIL_ONLY, post_campaign
from tidings.campaigns.expander import Expander
from tidings.clock import utcnow
from tidings.service import Service
from tidings.store.schema import delivery

SUBSCRIBERS = 100_000

pytestmark = pytest.mark.slow

FOLLOWERS = """
INSERT INTO user_profile (id, email, timezone, created_at, updated_at)
SELECT 'fan-' || lpad(n::text, 6, '0'), 'fan-' || n || '@example.com', 'UTC', now(), now()
FROM generate_series(1, :n) AS n;
"""
SUBSCRIPTIONS = """
INSERT INTO topic_subscription (topic, user_id, created_at)
SELECT 'artist:77', 'fan-' || lpad(n::text, 6, '0'), now() FROM generate_series(1, :n) AS n;
"""


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
async def test_planned_times_are_uniform_per_minute(
    client: httpx.AsyncClient, service: Service
) -> None:
    await put_type(client, "presale", **EMAIL_ONLY)
    async with service.db.engine.begin() as conn:
        await conn.execute(sa.text(FOLLOWERS), {"n": SUBSCRIBERS})
        await conn.execute(sa.text(SUBSCRIPTIONS), {"n": SUBSCRIBERS})
    start = (utcnow() + timedelta(hours=1)).replace(microsecond=0)
    body = {
        "type": "presale",
        "audience": {"topic": "artist:77"},
        "sendAt": start.isoformat(),
        "spreadOver": "30m",
    }
    campaign_id = (await post_campaign(client, body)).json()["campaignId"]
    async with service.db.engine.begin() as conn:  # due for expansion now, planned from start
        await conn.execute(sa.text("UPDATE campaign SET send_at = :s"), {"s": utcnow()})
    expander = Expander(service.db, service.types, service.wakeup, service.settings.campaigns, "t")
    assert await expander.step()
    query = sa.select(delivery.c.next_attempt_at).where(
        delivery.c.campaign_id == uuid.UUID(campaign_id)
    )
    async with service.db.engine.connect() as conn:
        planned = list(await conn.scalars(query))
        first = (await conn.execute(sa.text("SELECT send_at FROM campaign"))).scalar_one()
    assert len(planned) == SUBSCRIBERS
    minutes = Counter(int((t - first).total_seconds() // 60) for t in planned)
    assert sorted(minutes) == list(range(30))
    mean = SUBSCRIBERS / 30
    assert all(abs(n - mean) <= 0.1 * mean for n in minutes.values()), minutes
