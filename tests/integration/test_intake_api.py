"""The intake API: accept, idempotency, batches, and a clear 4xx for every bad input."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import sqlalchemy as sa

from tests.helpers import email_to, post, put_type
from tidings.api.app import create_app
from tidings.service import Service
from tidings.settings import Settings
from tidings.store.engine import Database
from tidings.store.schema import delivery, notification


async def count(db: Database, table: sa.Table) -> int:
    async with db.engine.connect() as conn:
        return int((await conn.scalar(sa.select(sa.func.count()).select_from(table))) or 0)


async def test_accept_commits_and_answers_202(client: httpx.AsyncClient, db: Database) -> None:
    await put_type(client)
    response = await post(client, email_to(data={"order": 42}))
    assert response.status_code == 202, response.text
    body = response.json()
    assert body["status"] == "accepted"
    assert [(d["channel"], d["status"]) for d in body["deliveries"]] == [("email", "PENDING")]
    shown = (await client.get(f"/v1/notifications/{body['id']}")).json()
    assert shown["deliveries"][0]["address"] == "a***@example.com"
    assert shown["deliveries"][0]["status"] == "PENDING"
    assert await count(db, notification) == 1


async def test_same_key_same_body_gives_same_answer_and_no_rows(
    client: httpx.AsyncClient, db: Database
) -> None:
    await put_type(client)
    first = await post(client, email_to(), key="order-1")
    again = await post(client, email_to(), key="order-1")
    assert again.status_code == 202
    assert again.json() == first.json()
    assert again.headers.get("Idempotent-Replayed") == "true"
    assert (await count(db, notification), await count(db, delivery)) == (1, 1)


async def test_same_key_different_body_is_a_conflict(client: httpx.AsyncClient) -> None:
    await put_type(client)
    first = await post(client, email_to(), key="order-1")
    other = await post(client, email_to("bob@example.com"), key="order-1")
    assert other.status_code == 409
    error = other.json()["error"]
    assert error["code"] == "idempotency_key_reused"
    assert error["field"] == "Idempotency-Key"
    assert first.json()["id"] in error["message"]


async def test_keys_are_scoped_per_namespace(client: httpx.AsyncClient, db: Database) -> None:
    await put_type(client)
    await post(client, email_to(), key="k")
    async with db.engine.connect() as conn:
        namespaces = (await conn.execute(sa.select(notification.c.namespace))).scalars().all()
    assert namespaces == ["default"]


async def test_racing_requests_with_one_key_create_one_notification(
    client: httpx.AsyncClient, db: Database
) -> None:
    await put_type(client)
    answers = await asyncio.gather(*(post(client, email_to(), key="race") for _ in range(10)))
    assert {a.status_code for a in answers} == {202}
    assert len({a.json()["id"] for a in answers}) == 1
    assert (await count(db, notification), await count(db, delivery)) == (1, 1)


async def test_user_profile_and_devices_address_the_deliveries(
    client: httpx.AsyncClient,
) -> None:
    await put_type(client)
    user = {"email": "ana@example.com", "phone": "+5511912345678", "timezone": "America/Sao_Paulo"}
    assert (await client.put("/v1/users/u1", json=user)).status_code == 201
    for token in ("tok-aaaaaaaaaaaaaaaa", "tok-bbbbbbbbbbbbbbbb"):
        device = {"userId": "u1", "platform": "ios", "token": token}
        assert (await client.post("/v1/devices", json=device)).status_code == 201
    assert (await client.delete("/v1/devices/tok-bbbbbbbbbbbbbbbb")).status_code == 204
    response = await post(client, {"type": "order.confirmed", "userId": "u1"})
    assert response.status_code == 202, response.text
    channels = sorted(d["channel"] for d in response.json()["deliveries"])
    assert channels == ["email", "push", "sms"]


async def test_channels_without_address_are_skipped_with_a_reason(
    client: httpx.AsyncClient,
) -> None:
    await put_type(client)
    response = await post(client, {"type": "order.confirmed", "to": {"email": "a@example.com"}})
    statuses = {d["channel"]: d["status"] for d in response.json()["deliveries"]}
    assert statuses == {"email": "PENDING", "sms": "SKIPPED", "push": "SKIPPED"}
    shown = (await client.get(f"/v1/notifications/{response.json()['id']}")).json()
    skipped = [d for d in shown["deliveries"] if d["status"] == "SKIPPED"]
    assert {d["skipReason"] for d in skipped} == {"no_address"}


async def test_batch_answers_each_item_in_order(client: httpx.AsyncClient, db: Database) -> None:
    await put_type(client)
    items = [
        {"idempotencyKey": "b1", **email_to("a@example.com")},
        {"idempotencyKey": "b2", "type": "nope", "to": {"email": "b@example.com"}},
        {"idempotencyKey": "b3", **email_to("c@example.com")},
        {"idempotencyKey": "b1", **email_to("a@example.com")},  # repeated in the batch
        {"idempotencyKey": "b3", **email_to("other@example.com")},  # key reused, other body
        {"type": "order.confirmed"},  # no key
    ]
    response = await client.post("/v1/notifications/batch", json={"notifications": items})
    assert response.status_code == 200, response.text
    results = response.json()["results"]
    assert [r["index"] for r in results] == list(range(6))
    assert [r["status"] for r in results] == [
        "accepted",
        "error",
        "accepted",
        "accepted",
        "error",
        "error",
    ]
    assert results[1]["error"]["code"] == "unknown_type"
    assert results[3]["id"] == results[0]["id"]
    assert results[4]["error"]["code"] == "idempotency_key_reused"
    assert results[5]["error"]["field"] == "idempotencyKey"
    assert await count(db, notification) == 2


async def test_batch_over_1000_items_is_refused(client: httpx.AsyncClient) -> None:
    items = [{"idempotencyKey": f"k{i}", **email_to()} for i in range(1001)]
    response = await client.post("/v1/notifications/batch", json={"notifications": items})
    assert response.status_code == 422
    assert response.json()["error"]["field"] == "notifications"


async def test_send_at_in_the_future_waits(client: httpx.AsyncClient, db: Database) -> None:
    await put_type(client)
    later = datetime.now(UTC) + timedelta(hours=1)
    response = await post(client, email_to(sendAt=later.isoformat()))
    assert response.status_code == 202
    async with db.engine.connect() as conn:
        due = await conn.scalar(sa.select(delivery.c.next_attempt_at))
    assert due is not None and abs((due - later).total_seconds()) < 0.01


async def test_get_unknown_notification_is_404(client: httpx.AsyncClient) -> None:
    response = await client.get(f"/v1/notifications/{uuid.uuid4()}")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
    assert (await client.get("/v1/notifications/not-a-uuid")).status_code == 422


async def test_types_users_round_trip(client: httpx.AsyncClient) -> None:
    await put_type(
        client, "otp", priority="high", channels=("sms",), ttl=300, retry={"maxAttempts": 3}
    )
    shown = (await client.get("/v1/types/otp")).json()
    assert (shown["priority"], shown["channels"], shown["ttl"]) == ("high", ["sms"], 300)
    assert shown["retry"]["maxAttempts"] == 3
    assert (await client.get("/v1/types/missing")).status_code == 404
    await client.put("/v1/users/u1", json={"email": "a@example.com", "locale": "pt-BR"})
    assert (await client.get("/v1/users/u1")).json()["locale"] == "pt-BR"
    assert (await client.get("/v1/users/nobody")).status_code == 404
    assert (await client.delete("/v1/devices/unknown")).status_code == 404


async def test_health_and_readiness(client: httpx.AsyncClient) -> None:
    assert (await client.get("/healthz")).json() == {"status": "ok"}
    ready = await client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["status"] == "ready"


async def test_openapi_documents_every_endpoint(client: httpx.AsyncClient) -> None:
    assert (await client.get("/docs")).status_code == 200
    paths = (await client.get("/openapi.json")).json()["paths"]
    for path in (
        "/v1/notifications",
        "/v1/notifications/batch",
        "/v1/notifications/{notification_id}",
        "/v1/types/{name}",
        "/v1/users/{user_id}",
        "/v1/devices",
        "/v1/devices/{token}",
        "/healthz",
        "/readyz",
    ):
        assert path in paths


async def test_two_processes_racing_with_one_key_create_one_notification(
    client: httpx.AsyncClient, settings: Settings, db: Database
) -> None:
    """Not grouped in one process: two services, each with its own pool, race in the
    database, where the unique index decides."""
    await put_type(client)
    other = Service.from_settings(settings)
    transport = httpx.ASGITransport(app=create_app(other))
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://other") as second:
            for attempt in range(5):
                key = f"race-{attempt}"
                answers = await asyncio.gather(
                    post(client, email_to(), key=key), post(second, email_to(), key=key)
                )
                assert [a.status_code for a in answers] == [202, 202]
                assert answers[0].json()["id"] == answers[1].json()["id"]
    finally:
        await other.close()
    assert (await count(db, notification), await count(db, delivery)) == (5, 5)


async def test_readyz_reports_a_database_that_needs_migrating(tmp_path: Path) -> None:
    service = Service.from_settings(Settings(database_url=f"sqlite:///{tmp_path}/new.db"))
    transport = httpx.ASGITransport(app=create_app(service))
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as fresh:
            ready = await fresh.get("/readyz")
    finally:
        await service.close()
    assert ready.status_code == 503
    assert ready.json()["error"]["code"] == "migrations_pending"
    assert "tidings migrate" in ready.json()["error"]["message"]


async def test_the_batch_body_is_documented_and_its_envelope_checked(
    client: httpx.AsyncClient,
) -> None:
    spec = (await client.get("/openapi.json")).json()
    body = spec["paths"]["/v1/notifications/batch"]["post"]["requestBody"]
    assert body["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/BatchIn"}
    batch_in = spec["components"]["schemas"]["BatchIn"]
    assert batch_in["properties"]["notifications"]["items"]["$ref"].endswith("/BatchItemIn")
    assert "BatchItemIn" in spec["components"]["schemas"]
    not_json = await client.post("/v1/notifications/batch", content=b"{oops")
    assert not_json.status_code == 400
    for envelope in ({}, {"notifications": []}, {"notifications": "x"}, [1]):
        answer = await client.post("/v1/notifications/batch", json=envelope)
        assert answer.status_code == 422, envelope
        assert answer.json()["error"]["field"] in ("notifications", None)
