"""DELETE /v1/users/{id} (issue 29): after it no table holds the user's email, phone or
device token in clear (every text and JSON column of every table is scanned), it says what
it erased, and an address that was suppressed stays suppressed."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import sqlalchemy as sa

from tests.helpers import delivery_statuses, eventually, post, put_type, running_dispatcher
from tidings.clock import utcnow
from tidings.providers.testing import Script, ScriptedProvider
from tidings.service import Service
from tidings.store.schema import inbound_reply, metadata

EMAIL = "ana.erase@example.com"
PHONE = "+15550009876"
TOKEN = "device-token-of-ana-0123456789"
SECRETS = (EMAIL, PHONE, TOKEN)


async def clear_text_holders(service: Service) -> list[str]:
    """``table.column`` of every text or JSON column holding one of SECRETS."""
    found = []
    async with service.db.engine.connect() as conn:
        for table in metadata.sorted_tables:
            for column in table.columns:
                if not isinstance(column.type, sa.String | sa.JSON):
                    continue
                text = sa.cast(column, sa.Text)
                held = sa.or_(*(text.contains(secret, autoescape=True) for secret in SECRETS))
                count = await conn.scalar(sa.select(sa.func.count()).where(held))
                if count:
                    found.append(f"{table.name}.{column.name}")
    return found


async def ana_sent_everything(client: httpx.AsyncClient, service: Service) -> list[str]:
    """Ana with a profile, a device, preferences and a topic; three notifications sent to
    her (the SMS fails permanently, its error naming her phone); her email suppressed;
    a STOP from her phone. Their ids."""
    await put_type(client, channels=("email", "sms", "push"))
    profile = {"email": EMAIL, "phone": PHONE, "attributes": {"plan": "pro"}}
    assert (await client.put("/v1/users/ana", json=profile)).status_code == 201
    device = {"userId": "ana", "platform": "android", "token": TOKEN}
    assert (await client.post("/v1/devices", json=device)).status_code == 201
    choices = {"categories": {"marketing": {"email": False}}}
    assert (await client.put("/v1/users/ana/preferences", json=choices)).status_code == 200
    followed = await client.put("/v1/topics/artist:7/subscribers", json={"userIds": ["ana"]})
    assert followed.status_code == 200
    ids = []
    for body in (
        {"type": "order.confirmed", "userId": "ana", "data": {"contact": EMAIL}},
        {"type": "order.confirmed", "to": {"email": EMAIL}, "channels": ["email"]},
        {"type": "order.confirmed", "userId": "ana", "channels": ["sms", "push"]},
    ):
        answer = await post(client, body)
        assert answer.status_code == 202, answer.text
        ids.append(answer.json()["id"])
    provider = ScriptedProvider(scripts={PHONE: Script(permanent=True)})
    async with running_dispatcher(service, provider):
        for notification_id in ids:

            async def done(notification_id: str = notification_id) -> bool:
                statuses = await delivery_statuses(client, notification_id)
                return all(s in ("SENT", "FAILED") for s in statuses)

            await eventually(done)
    assert (await client.put(f"/v1/suppressions/email/{EMAIL}", json={})).status_code in (200, 201)
    reply = {"id": uuid.uuid4(), "account": "twilio", "sender": PHONE, "keyword": "STOP"}
    reply |= {"action": "none", "at": utcnow()}
    async with service.db.engine.begin() as conn:
        await conn.execute(sa.insert(inbound_reply).values(reply))
    return ids


async def test_erasure_leaves_no_address_in_clear_and_keeps_suppressions(
    client: httpx.AsyncClient, service: Service
) -> None:
    ids = await ana_sent_everything(client, service)
    assert await clear_text_holders(service) != []  # the scan sees them before

    answer = await client.delete("/v1/users/ana")
    assert answer.status_code == 200, answer.text
    erased: dict[str, Any] = answer.json()
    assert erased["userId"] == "ana" and erased["profile"] is True
    assert (erased["devices"], erased["preferences"], erased["topics"]) == (1, 1, 1)
    assert erased["deliveries"] == 6 and erased["suppressions"] == 1
    assert erased["replies"] == 1 and erased["notifications"] == 1

    assert await clear_text_holders(service) == []
    assert (await client.get("/v1/users/ana")).status_code == 404
    assert (await client.get("/v1/users/ana/devices")).json() == []
    shown = (await client.get(f"/v1/notifications/{ids[0]}")).json()
    assert [d["status"] for d in shown["deliveries"]] == ["SENT", "FAILED", "SENT"]

    resend = {"type": "order.confirmed", "to": {"email": EMAIL.upper()}, "channels": ["email"]}
    again = await post(client, resend)
    assert again.status_code == 202, again.text
    (delivery,) = again.json()["deliveries"]
    assert (delivery["status"], delivery["channel"]) == ("SKIPPED", "email")
    skipped = (await client.get(f"/v1/notifications/{again.json()['id']}")).json()
    assert skipped["deliveries"][0]["skipReason"] == "suppressed"

    repeated = (await client.delete("/v1/users/ana")).json()
    assert repeated["profile"] is False and repeated["devices"] == 0


async def test_erasing_nobody_erases_nothing(client: httpx.AsyncClient) -> None:
    answer = await client.delete("/v1/users/nobody")
    assert answer.status_code == 200
    assert answer.json()["profile"] is False and answer.json()["deliveries"] == 0
    assert (await client.delete(f"/v1/users/{'x' * 256}")).status_code == 422
