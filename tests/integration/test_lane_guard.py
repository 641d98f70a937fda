"""No delivery can end a dispatcher: whatever its processing raises fails that delivery
(FAILED, poison, the error on the row) and the lane goes on with the others.

The bad data is stored directly in the database, as an older release or a hand edit could
have left it, bypassing the API's own bounds.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import httpx
import sqlalchemy as sa

from tests.helpers import eventually, post, put_type, running_dispatcher
from tidings.providers.testing import ScriptedProvider
from tidings.service import Service
from tidings.settings import Settings
from tidings.store.schema import delivery, notification_type, template, user_profile

# A macro that calls itself: the renderer runs out of stack (RecursionError).
RECURSIVE = "{% macro r() %}{{ r() }}{% endmacro %}{{ r() }}"
# Beyond what a timedelta can hold where the column allows it (SQLite); PostgreSQL's integer
# column stops at 2**31 - 1, which overflows only from a row created near the year 9999.
ABSURD_TTL = {"sqlite": 10**18, "postgresql": 2**31 - 1}
FAR_FUTURE = datetime(9999, 12, 1, tzinfo=UTC)


async def _post(client: httpx.AsyncClient, type_name: str, **extra: Any) -> str:
    body = {"type": type_name, "to": {"email": f"{type_name}@example.com"}, **extra}
    response = await post(client, body)
    assert response.status_code == 202, response.text
    notification_id: str = response.json()["id"]
    return notification_id


async def _corrupt(service: Service, backend: str) -> None:
    """What the API would refuse, written straight into the tables."""
    async with service.db.engine.begin() as conn:
        await conn.execute(
            sa.update(notification_type)
            .where(notification_type.c.name == "forever")
            .values(ttl_seconds=ABSURD_TTL[backend])
        )
        if backend == "postgresql":
            forever = sa.select(delivery.c.id).where(delivery.c.address == "forever@example.com")
            await conn.execute(
                sa.update(delivery)
                .where(delivery.c.id.in_(forever.scalar_subquery()))
                .values(created_at=FAR_FUTURE)
            )
        await conn.execute(
            sa.update(template).where(template.c.type == "recursive").values(text=RECURSIVE)
        )
        await conn.execute(
            sa.update(notification_type)
            .where(notification_type.c.name == "odd")
            .values(retry={"maxAttempts": "many"})
        )
        await conn.execute(
            sa.update(user_profile)
            .where(user_profile.c.id == "fan")
            .values(timezone="Nowhere/Atlantis")
        )


async def _statuses(service: Service) -> dict[str, tuple[str, str | None, str | None]]:
    query = sa.select(
        delivery.c.address, delivery.c.status, delivery.c.failure_kind, delivery.c.last_error
    )
    async with service.db.engine.connect() as conn:
        rows = (await conn.execute(query)).all()
    return {
        row.address.split("@")[0]: (row.status, row.failure_kind, row.last_error) for row in rows
    }


async def test_no_delivery_can_end_the_dispatcher(
    client: httpx.AsyncClient, service: Service, settings: Settings, backend: str
) -> None:
    for name in ("normal", "forever", "recursive", "odd"):
        await put_type(client, name, channels=("email",))
    await put_type(client, "promo", category="marketing", channels=("email",))
    response = await client.put("/v1/users/fan/preferences", json={"timezone": "Asia/Tokyo"})
    assert response.status_code == 200, response.text
    for name in ("forever", "recursive", "odd", "normal"):
        await _post(client, name)
    await _post(client, "promo", userId="fan")  # its daily cap is counted in the user's zone
    await _corrupt(service, backend)

    # A service of its own, as a dispatcher process has: nothing cached from before.
    dispatching = Service.from_settings(settings)
    provider = ScriptedProvider()
    try:
        async with running_dispatcher(dispatching, provider):  # re-raises if it died

            async def settled() -> dict[str, Any] | None:
                rows = await _statuses(service)
                done = all(status in ("SENT", "FAILED") for status, _, _ in rows.values())
                return rows if done else None

            rows = await eventually(settled, within=20)
            # The dispatcher is still at work: a delivery posted now is sent as well.
            await _post(client, "normal", to={"email": "later@example.com"})
            await eventually(lambda: len(provider.completed) == 4, within=10)
    finally:
        await dispatching.close()
    assert rows["normal"][0] == "SENT"
    assert rows["forever"][0] == "SENT"  # a ttl beyond any date never expires
    assert rows["odd"][0] == "SENT"  # unreadable stored rules: the defaults apply
    status, kind, error = rows["recursive"]
    assert (status, kind) == ("FAILED", "poison")
    assert error is not None and "recursion" in error.lower()
    status, kind, error = rows["promo"]
    assert (status, kind) == ("FAILED", "poison")
    assert error is not None and "ZoneInfoNotFoundError" in error
    assert sorted(c.address for c in provider.completed) == [
        "forever@example.com",
        "later@example.com",
        "normal@example.com",
        "odd@example.com",
    ]


async def test_the_dead_letters_list_a_delivery_the_guard_failed(
    client: httpx.AsyncClient, service: Service, settings: Settings, backend: str
) -> None:
    await put_type(client, "recursive", channels=("email",))
    notification_id = await _post(client, "recursive")
    await _corrupt(service, backend)
    dispatching = Service.from_settings(settings)
    try:
        async with running_dispatcher(dispatching, ScriptedProvider()):

            async def listed() -> list[dict[str, Any]]:
                response = await client.get("/v1/dead-letters")
                assert response.status_code == 200, response.text
                items: list[dict[str, Any]] = response.json()
                return items

            [item] = await eventually(listed, within=20)
    finally:
        await dispatching.close()
    assert item["notificationId"] == notification_id
    assert item["failureKind"] == "poison"
