"""The requests of the design tidings implements, sent as written (the same bytes) to a real
``tidings serve``: each works, and a campaign without an Idempotency-Key is refused on purpose
(a retried campaign must not reach its audience twice)."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from tests.helpers import eventually
from tests.processes import free_port, tidings_env, tidings_processes, wait_ready

# Copied from the design as written, including its characters ("—", "…").
NOTIFICATION = """{"userId": 42, "type": "order.confirmed", "priority": "transactional",
 "data": {"orderId": "81f3", "event": "Rock in Rio — Day 2", "seats": ["A-12-07", "A-12-08"]}}"""
CAMPAIGN = """{"audience": {"followersOf": "artist:77"}, "type": "presale.alert",
 "sendAt": "2027-03-10T15:00:00Z", "spreadOver": "30m", "channels": ["push", "email"]}"""
PREFERENCES = """{"marketing": {"push": true, "email": false}, "quietHours": {"from": "22:00", "to": "08:00"},
 "timezone": "America/Sao_Paulo", "locale": "pt-BR"}"""  # noqa: E501
DEVICE = """{"userId": 42, "platform": "ios", "token": "…"}"""
JSON = {"Content-Type": "application/json"}

ORDER_TEMPLATE = {"subject": "Order {{ orderId }}", "text": "{{ event }}: {{ seats | join(', ') }}"}
PRESALE_TEMPLATES = {
    "push": {"subject": "Presale", "text": "Presale opens soon"},
    "email": {"subject": "Presale", "text": "Presale opens soon"},
}


async def _setup(client: httpx.AsyncClient) -> None:
    """What the design takes as given: the types, their templates, user 42."""
    order = {"category": "transactional", "priority": "high", "channels": ["email"]}
    assert (await client.put("/v1/types/order.confirmed", json=order)).status_code == 201
    url = "/v1/templates/order.confirmed/email/en"
    assert (await client.put(url, json=ORDER_TEMPLATE)).status_code == 201
    presale = {"category": "marketing", "priority": "low", "channels": ["push", "email"]}
    assert (await client.put("/v1/types/presale.alert", json=presale)).status_code == 201
    for channel, template in PRESALE_TEMPLATES.items():
        url = f"/v1/templates/presale.alert/{channel}/en"
        assert (await client.put(url, json=template)).status_code == 201
    user = {"email": "fan42@example.com"}
    assert (await client.put("/v1/users/42", json=user)).status_code == 201
    follows = await client.put("/v1/topics/artist:77/subscribers", json={"userIds": ["42"]})
    assert follows.status_code == 200, follows.text


@pytest.mark.slow
async def test_the_designs_requests_work_as_written(tmp_path: Path) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with tidings_processes(tidings_env(), tmp_path) as processes:
        server = processes.start("serve", ["serve", "--port", str(port)])
        await wait_ready(base, server)
        async with httpx.AsyncClient(base_url=base) as client:
            await _setup(client)
            await _notification(client, tmp_path)
            await _preferences_and_devices(client)
            await _campaign(client)


async def _notification(client: httpx.AsyncClient, workdir: Path) -> None:
    headers = {**JSON, "Idempotency-Key": "order-81f3-confirmed"}
    response = await client.post("/v1/notifications", content=NOTIFICATION, headers=headers)
    assert response.status_code == 202, response.text
    answer = response.json()
    assert answer["notificationId"] == answer["id"] and answer["status"] == "accepted"
    shown = await client.get(f"/v1/notifications/{answer['notificationId']}")
    assert shown.status_code == 200, shown.text
    assert (shown.json()["userId"], shown.json()["priority"]) == ("42", "high")
    # Sent to user 42's address, through the default outbox.
    written = workdir / "outbox" / "email" / f"{answer['deliveries'][0]['id']}.json"
    await eventually(written.exists, within=10.0)
    sent = json.loads(written.read_text())
    assert sent["address"] == "fan42@example.com"
    assert sent["data"]["event"] == "Rock in Rio — Day 2"


async def _preferences_and_devices(client: httpx.AsyncClient) -> None:
    response = await client.put("/v1/users/42/preferences", content=PREFERENCES, headers=JSON)
    assert response.status_code in (200, 204), response.text
    shown = (await client.get("/v1/users/42/preferences")).json()
    assert shown["categories"]["marketing"]["email"] is False
    assert shown["categories"]["marketing"]["push"] is True
    assert shown["quietHours"] == {"from": "22:00", "to": "08:00"}
    assert (shown["timezone"], shown["locale"]) == ("America/Sao_Paulo", "pt-BR")

    response = await client.post("/v1/devices", content=DEVICE, headers=JSON)
    assert response.status_code == 201, response.text
    assert response.json()["userId"] == "42"
    response = await client.delete(f"/v1/devices/{quote('…')}")
    assert response.status_code == 204, response.text


async def _campaign(client: httpx.AsyncClient) -> None:
    # As written, without a key: refused, deliberately (README, Campaigns).
    refused = await client.post("/v1/campaigns", content=CAMPAIGN, headers=JSON)
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"]["field"] == "Idempotency-Key"
    headers = {**JSON, "Idempotency-Key": "presale-artist-77"}
    response = await client.post("/v1/campaigns", content=CAMPAIGN, headers=headers)
    assert response.status_code == 202, response.text
    campaign_id = response.json()["campaignId"]
    assert response.json()["status"]
    cancelled = await client.post(f"/v1/campaigns/{campaign_id}/cancel")
    assert cancelled.status_code == 200, cancelled.text
    assert {"sent", "cancelled"} <= cancelled.json().keys()
