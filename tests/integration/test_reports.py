"""Campaign and type reports (docs/events.md, Reports): counters folded from the event log
equal what happened, and unique opens leave machine opens out."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import httpx
import sqlalchemy as sa

from tests.helpers import eventually, put_type, running_dispatcher
from tests.integration.test_campaigns import EMAIL_ONLY, _status_is, add_users, post_campaign
from tidings.clock import utcnow
from tidings.providers.testing import Script, ScriptedProvider
from tidings.service import Service
from tidings.store import reports
from tidings.store.schema import delivery

HUMAN = {"User-Agent": "Mozilla/5.0 (X11; Linux x86_64) Thunderbird/128.0"}
MACHINE = {"User-Agent": "Mozilla/5.0"}  # Apple Mail Privacy Protection's proxies


async def fold_all(service: Service) -> None:
    while await reports.fold(service.db, limit=7):  # several rounds
        pass


async def deliveries(service: Service, campaign_id: str) -> dict[str, uuid.UUID]:
    query = sa.select(delivery.c.address, delivery.c.id).where(
        delivery.c.campaign_id == uuid.UUID(campaign_id)
    )
    async with service.db.engine.connect() as conn:
        return {row.address: row.id for row in await conn.execute(query)}


async def test_a_campaign_report_counts_what_happened(
    client: httpx.AsyncClient, service: Service
) -> None:
    await put_type(client, "sale", **EMAIL_ONLY)
    ids = await add_users(client, 12)
    await client.put("/v1/suppressions/email/user-00000@example.com", json={"reason": "manual"})
    answer = await post_campaign(client, {"type": "sale", "audience": {"topic": "artist:77"}})
    campaign = answer.json()["campaignId"]
    bad = "user-00001@example.com"
    provider = ScriptedProvider(scripts={bad: Script(permanent=True)})
    async with running_dispatcher(service, provider):
        await eventually(lambda: _status_is(client, campaign, "DONE"), within=20, interval=0.1)
    found = await deliveries(service, campaign)
    links = service.engagement
    opens = [(2, HUMAN), (2, HUMAN), (3, MACHINE), (4, MACHINE), (4, HUMAN), (5, HUMAN)]
    for user, agent in opens:
        token = links.open_url(found[f"{ids[user]}@example.com"]).rsplit("/", 1)[1]
        assert (await client.get(f"/t/o/{token}", headers=agent)).status_code == 200
    for user in (2, 2, 6):
        url = links.click_url(found[f"{ids[user]}@example.com"], "https://shop.example/")
        assert (await client.get("/t/c/" + url.rsplit("/", 1)[1], headers=HUMAN)).status_code == 302

    async def report() -> dict[str, Any] | None:
        # PostgreSQL shows an event once every older transaction on the server has ended.
        await fold_all(service)
        found: dict[str, Any] = (await client.get(f"/v1/campaigns/{campaign}/report")).json()
        complete = found["opened"]["total"] == 6 and found["clicked"]["total"] == 3
        return found if complete and found["sent"] == 10 else None

    shown: dict[str, Any] = await eventually(report)
    assert shown["sent"] == 10 and shown["failed"] == 1
    assert shown["skipped"] == {"total": 1, "byReason": {"suppressed": 1}}
    assert shown["opened"] == {"total": 6, "unique": 4, "uniqueHuman": 3}
    assert shown["clicked"] == {"total": 3, "unique": 2}
    assert shown["rates"]["opened"] == 0.3 and shown["rates"]["clicked"] == 0.2

    # Folding again counts nothing twice; the type's report over today holds the same.
    await fold_all(service)
    again = (await client.get(f"/v1/campaigns/{campaign}/report")).json()
    assert again == shown
    typed = (await client.get("/v1/types/sale/report")).json()
    assert typed == shown
    other = await client.get("/v1/campaigns/" + str(uuid.uuid4()) + "/report")
    assert other.status_code == 404
    wrong = await client.get(
        "/v1/types/sale/report", params={"from": "2026-12-02", "to": "2026-12-01"}
    )
    assert wrong.status_code == 422 and wrong.json()["error"]["field"] == "from"
    # A window holding today holds it all; one that ends yesterday, nothing.
    today = utcnow().date()
    window = {"from": str(today - timedelta(days=2)), "to": str(today)}
    assert (await client.get("/v1/types/sale/report", params=window)).json() == shown
    before = {"from": str(today - timedelta(days=3)), "to": str(today - timedelta(days=1))}
    earlier = (await client.get("/v1/types/sale/report", params=before)).json()
    assert earlier["sent"] == 0 and earlier["opened"]["total"] == 0
    unknown = await client.get("/v1/types/no.such.type/report")
    assert unknown.status_code == 404 and unknown.json()["error"]["field"] == "name"
