"""Due spikes: many sends scheduled for one instant are spread over the due-spread window
after it (campaigns.due_spread_seconds), except HIGH ones, which are never held back."""

from __future__ import annotations

import uuid
from datetime import timedelta

import httpx
import sqlalchemy as sa

from tests.helpers import post, put_type
from tidings.clock import utcnow
from tidings.service import Service
from tidings.store.schema import delivery, notification


async def test_scheduled_sends_at_one_instant_are_spread_over_the_window(
    client: httpx.AsyncClient, service: Service
) -> None:
    service.settings.campaigns.due_spread_seconds = 60
    await put_type(client, "reminder", priority="normal", channels=("email",))
    await put_type(client, "otp", priority="high", channels=("email",))
    at = (utcnow() + timedelta(hours=1)).replace(microsecond=0)
    for n in range(200):
        body = {"type": "reminder", "to": {"email": f"u{n}@example.com"}, "sendAt": at.isoformat()}
        assert (await post(client, body)).status_code == 202
    for n in range(20):
        body = {"type": "otp", "to": {"email": f"o{n}@example.com"}, "sendAt": at.isoformat()}
        assert (await post(client, body, key=str(uuid.uuid4()))).status_code == 202
    query = sa.select(notification.c.type, delivery.c.next_attempt_at).join(
        notification, notification.c.id == delivery.c.notification_id
    )
    async with service.db.engine.connect() as conn:
        found = list(await conn.execute(query))
    reminders = [row.next_attempt_at for row in found if row.type == "reminder"]
    otps = {row.next_attempt_at for row in found if row.type == "otp"}
    assert otps == {at}
    offsets = [(due - at).total_seconds() for due in reminders]
    assert all(0 <= offset <= 60 for offset in offsets)
    # Spread, not a wall: each fifth of the minute holds some of them.
    assert all(any(k * 12 <= o < (k + 1) * 12 for o in offsets) for k in range(5))
    # The notification keeps the sendAt it was given.
    async with service.db.engine.connect() as conn:
        send_ats = set(await conn.scalars(sa.select(notification.c.send_at)))
    assert send_ats == {at}
