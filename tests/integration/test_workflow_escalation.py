"""Escalation against the simulator (issue 26, must-show): email (simulated SendGrid), then
SMS (simulated Twilio) unless the email was opened, after a wait. 1,000 recipients, of
whom about half (by notification id) report an open through the engagement call as soon as
their email is made: exactly the others get the SMS,
each after its wait and not before."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from tests.helpers import eventually, put_templates
from tests.integration.test_provider_loop import (
    PUBLIC,
    accept,
    decided,
    serving,
    settled,
    simulator,
)
from tidings.service import Service
from tidings.settings import Settings
from tidings.simulator.behaviour import Behaviour
from tidings.store.schema import delivery, workflow_step

USERS = 1000
WAIT = 10  # seconds: short, but longer than the opens take on a loaded machine


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"public_url": PUBLIC})


async def _email_ids(service: Service) -> dict[uuid.UUID, uuid.UUID]:
    query = sa.select(delivery.c.notification_id, delivery.c.id).where(
        delivery.c.channel == "email"
    )
    async with service.db.engine.connect() as conn:
        return {row.notification_id: row.id for row in await conn.execute(query)}


@pytest.mark.timeout(600)
@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
async def test_half_open_the_other_half_get_the_sms_after_the_wait(
    service: Service, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    workflow = [
        {"send": "email"},
        {"wait": f"{WAIT}s"},
        {"send": "sms", "unless": "email:opened"},
    ]
    kind = {"category": "reminder", "priority": "normal", "channels": ["email", "sms"]}
    response = await client.put("/v1/types/pay.reminder", json={**kind, "workflow": workflow})
    assert response.status_code == 201, response.text
    await put_templates(client, "pay.reminder", ("email", "sms"))
    quick = Behaviour(report_delay_ms=30)
    behaviours = {"sendgrid": quick, "twilio": quick}
    items = [
        {"type": "pay.reminder", "to": {"email": f"u{i}@example.com", "phone": f"+1555{i:07d}"}}
        for i in range(USERS)
    ]
    async with simulator(tmp_path, behaviours) as sim, serving(service, sim):
        await accept(client, items)
        emails, opened = await _open_half_as_they_come(client, service)
        total = USERS + USERS - len(opened)
        await eventually(lambda: settled(service, sim, total), within=300, interval=0.5)
        await eventually(lambda: _steps_ended(service), within=120, interval=0.5)
        sms = decided(sim, "twilio")

    phones = await _phones(service)
    expected = {phones[n] for n in emails if n not in opened}
    assert 400 < len(expected) < 600  # about half
    assert set(sms) == expected  # exactly the half that did not open, once each
    assert len(decided(sim, "sendgrid")) == USERS
    early = await _sent_before_the_wait(service)
    assert early == 0


async def _open_half_as_they_come(
    client: httpx.AsyncClient, service: Service
) -> tuple[dict[uuid.UUID, uuid.UUID], set[uuid.UUID]]:
    """Report an open of every other notification's email as soon as its email step made
    the delivery (well within the wait); the emails, and the notifications opened."""
    seen: dict[uuid.UUID, uuid.UUID] = {}
    opened: set[uuid.UUID] = set()
    deadline = asyncio.get_running_loop().time() + 300
    while len(seen) < USERS:
        assert asyncio.get_running_loop().time() < deadline, f"{len(seen)} emails made"
        found = await _email_ids(service)
        new = [n for n in found if n not in seen]
        seen.update(found)
        chosen = [n for n in new if n.int % 2 == 0]
        for n in chosen:
            url = f"/v1/deliveries/{found[n]}/engagement"
            answer = await client.post(url, json={"event": "opened"})
            assert answer.status_code == 202, answer.text
        opened.update(chosen)
        await asyncio.sleep(0.1)
    return seen, opened


async def _phones(service: Service) -> dict[uuid.UUID, str]:
    """Each notification's phone, as its SMS step holds it."""
    query = sa.select(workflow_step.c.notification_id, workflow_step.c.deliveries).where(
        workflow_step.c.step_index == 2
    )
    async with service.db.engine.connect() as conn:
        return {
            row.notification_id: row.deliveries[0]["address"] for row in await conn.execute(query)
        }


async def _steps_ended(service: Service) -> bool:
    running = workflow_step.c.state.in_(["WAITING", "PENDING", "RUNNING"])
    query = sa.select(sa.func.count()).where(running)
    async with service.db.engine.connect() as conn:
        return await conn.scalar(query) == 0


async def _sent_before_the_wait(service: Service) -> int:
    """SMS deliveries made before their notification's wait step ran plus WAIT seconds."""
    waits = sa.select(workflow_step.c.notification_id, workflow_step.c.ran_at).where(
        workflow_step.c.kind == "wait"
    )
    sms = sa.select(delivery.c.notification_id, delivery.c.created_at).where(
        delivery.c.channel == "sms"
    )
    async with service.db.engine.connect() as conn:
        ran = {row.notification_id: row.ran_at for row in await conn.execute(waits)}
        made = {row.notification_id: row.created_at for row in await conn.execute(sms)}
    return sum(1 for n, at in made.items() if at < ran[n] + timedelta(seconds=WAIT))
