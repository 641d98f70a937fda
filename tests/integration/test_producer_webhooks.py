"""Events pushed to producers' webhook endpoints (docs/events.md, Webhooks): every event
once after deduplicating by webhook-id, in order per notification, signed per Standard
Webhooks (checked with its reference library), waiting out a receiver that is down or not
listening, only the notification types chosen; a message that failed for good is sent
again, first, once its endpoint is enabled."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
import standardwebhooks
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.helpers import email_to, eventually, post, put_type, running_dispatcher
from tests.processes import free_port
from tidings.api.routes import webhook_endpoints
from tidings.background import producer_webhooks
from tidings.background.producer_webhooks import ProducerWebhooks
from tidings.clock import utcnow
from tidings.ids import new_id
from tidings.providers.testing import ScriptedProvider
from tidings.providers.webhook import signing as standard_webhooks
from tidings.service import Service
from tidings.settings import Settings
from tidings.store import producer_hooks
from tidings.store.schema import event as event_log
from tidings.store.schema import webhook_endpoint, webhook_message


@dataclass
class Receiver:
    """A producer's endpoint: keeps every request; answers 503 while ``down``."""

    port: int = field(default_factory=free_port)
    down: int = 0  # answer 503 to this many more requests
    received: list[tuple[dict[str, str], bytes]] = field(default_factory=list)
    refused: int = 0
    # Set: every request waits for it to be cleared before it is answered (a hung endpoint).
    hung: asyncio.Event | None = None
    waiting: int = 0
    most_waiting: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks"

    async def endpoint(self, request: Request) -> Response:
        if self.hung is not None:
            self.waiting += 1
            self.most_waiting = max(self.most_waiting, self.waiting)
            await self.hung.wait()
            self.waiting -= 1
        if self.down > 0:
            self.down -= 1
            self.refused += 1
            return Response(status_code=503)
        self.received.append((dict(request.headers), await request.body()))
        return Response(status_code=204)

    def unique(self) -> dict[str, dict[str, Any]]:
        return {h["webhook-id"]: json.loads(body) for h, body in self.received}


@contextlib.asynccontextmanager
async def receiving(receiver: Receiver) -> AsyncIterator[Receiver]:
    app = Starlette(routes=[Route("/hooks", receiver.endpoint, methods=["POST"])])
    config = uvicorn.Config(app, port=receiver.port, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    try:
        await eventually(lambda: server.started)
        yield receiver
    finally:
        server.should_exit = True
        await task


@pytest.fixture
def settings(settings: Settings) -> Settings:
    hooks = settings.webhooks.model_copy(
        update={"allow_private": True, "retry_delays": [0.05, 0.1], "poll_interval": 0.05}
    )
    return settings.model_copy(update={"webhooks": hooks})


@contextlib.asynccontextmanager
async def pushing(service: Service) -> AsyncIterator[None]:
    stop = asyncio.Event()
    task = asyncio.create_task(ProducerWebhooks(service.db, service.settings.webhooks).run(stop))
    try:
        yield
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)


async def test_every_event_arrives_once_in_order_and_signed(
    client: httpx.AsyncClient, service: Service
) -> None:
    await put_type(client, channels=("email", "sms"))
    await client.put("/v1/suppressions/sms/+15550001000", json={"reason": "manual"})
    async with receiving(Receiver(down=5)) as receiver, pushing(service):
        created = await client.post(
            "/v1/webhook-endpoints",
            json={"url": receiver.url, "events": ["delivery.sent", "delivery.skipped"]},
        )
        assert created.status_code == 201, created.text
        secret = created.json()["secret"]
        assert secret.startswith("whsec_")
        total = 20
        notifications = []
        for n in range(total):
            to = {"email": f"u{n}@example.com", "phone": "+15550001000"}
            answer = await post(client, {"type": "order.confirmed", "to": to})
            notifications.append(answer.json()["id"])
        async with running_dispatcher(service, ScriptedProvider()):
            await eventually(lambda: len(receiver.unique()) == 2 * total, within=30)
    assert receiver.refused == 5  # down for a while: those were sent again
    verifier = standardwebhooks.Webhook(secret)
    for headers, body in receiver.received:
        verifier.verify(body, headers)
    events = receiver.unique()
    assert len(events) == 2 * total
    per_notification: dict[str, list[str]] = {}
    for _headers, body in receiver.received:
        event = json.loads(body)
        per_notification.setdefault(event["data"]["notificationId"], []).append(event["type"])
    assert set(per_notification) == set(notifications)
    # The SMS was skipped at accept, before the email was sent: that order, per notification.
    for kinds in per_notification.values():
        assert list(dict.fromkeys(kinds)) == ["delivery.skipped", "delivery.sent"]
    attempts = (await client.get(f"/v1/webhook-endpoints/{created.json()['id']}/attempts")).json()
    assert {a["status"] for a in attempts} == {"SENT"}


async def test_endpoints_are_checked_and_managed(
    client: httpx.AsyncClient, service: Service
) -> None:
    bad = await client.post(
        "/v1/webhook-endpoints", json={"url": "ftp://example.com/x", "events": ["delivery.sent"]}
    )
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "url"
    unknown = await client.post(
        "/v1/webhook-endpoints",
        json={"url": "http://127.0.0.1:9/x", "events": ["delivery.nope"]},
    )
    assert unknown.status_code == 422 and unknown.json()["error"]["field"] == "events"
    made = await client.post(
        "/v1/webhook-endpoints", json={"url": "http://127.0.0.1:9/x", "events": ["delivery.sent"]}
    )
    assert made.status_code == 201
    endpoint = made.json()["id"]
    assert "secret" not in (await client.get(f"/v1/webhook-endpoints/{endpoint}")).json()
    rotated = (await client.post(f"/v1/webhook-endpoints/{endpoint}/rotate-secret")).json()
    assert rotated["secret"] != made.json()["secret"]
    assert [e["id"] for e in (await client.get("/v1/webhook-endpoints")).json()] == [endpoint]
    assert (await client.delete(f"/v1/webhook-endpoints/{endpoint}")).status_code == 204
    assert (await client.get(f"/v1/webhook-endpoints/{endpoint}")).status_code == 404


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
async def test_a_private_url_is_refused_unless_allowed(
    client: httpx.AsyncClient, service: Service
) -> None:
    service.settings.webhooks.allow_private = False
    urls = ("http://127.0.0.1:8080/x", "http://10.0.0.1/x", "http://[::1]/x", "http://localhost/x")
    for url in urls:
        refused = await client.post(
            "/v1/webhook-endpoints", json={"url": url, "events": ["delivery.sent"]}
        )
        assert refused.status_code == 422, url
        assert refused.json()["error"]["code"] == "private_url"
        assert refused.json()["error"]["field"] == "url"


class Clock:
    """The time the API and the dispatcher read (tidings.clock.utcnow where each uses it),
    set by the test: a day passes without sleeping through it."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.now = utcnow()
        for module in (webhook_endpoints, producer_webhooks):
            monkeypatch.setattr(module, "utcnow", lambda: self.now)


async def test_every_secret_replaced_within_a_day_signs_until_its_day_is_over(
    client: httpx.AsyncClient, service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    await put_type(client, channels=("email",))
    clock = Clock(monkeypatch)
    start = clock.now
    async with receiving(Receiver()) as receiver, pushing(service):
        made = await client.post(
            "/v1/webhook-endpoints", json={"url": receiver.url, "events": ["delivery.sent"]}
        )
        endpoint, first = made.json()["id"], made.json()["secret"]
        rotated = await client.post(f"/v1/webhook-endpoints/{endpoint}/rotate-secret")
        assert rotated.json()["previousValidUntil"] == _iso(start + DAY)
        clock.now = start + timedelta(hours=1)
        again = await client.post(f"/v1/webhook-endpoints/{endpoint}/rotate-secret")
        second, current = rotated.json()["secret"], again.json()["secret"]
        assert len({first, second, current}) == 3

        signed_by: list[set[str]] = []
        for hours in (2, 24.5, 25.5):  # all three; the first expired; the second too
            clock.now = start + timedelta(hours=hours)
            await post(client, email_to())
            async with running_dispatcher(service, ScriptedProvider()):
                await eventually(lambda: len(receiver.received) == len(signed_by) + 1, within=15)
            headers, body = receiver.received[-1]
            signed_by.append(_valid(body, headers, clock.now, first, second, current))
        clock.now = start + timedelta(hours=26)
        assert (await client.post(f"/v1/webhook-endpoints/{endpoint}/rotate-secret")).is_success
    assert signed_by == [{first, second, current}, {second, current}, {current}]
    found = await producer_hooks.get(service.db, service.settings.namespace, uuid.UUID(endpoint))
    assert found is not None and [s for s, _ in found.previous] == [current]  # expired: gone


async def test_rotations_are_refused_while_too_many_secrets_still_sign(
    client: httpx.AsyncClient, service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock(monkeypatch)
    made = await client.post(
        "/v1/webhook-endpoints", json={"url": "http://127.0.0.1:9/x", "events": ["delivery.sent"]}
    )
    rotate = f"/v1/webhook-endpoints/{made.json()['id']}/rotate-secret"
    for _ in range(producer_hooks.MAX_PREVIOUS_SECRETS):
        assert (await client.post(rotate)).status_code == 200
    refused = await client.post(rotate)
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "too_many_rotations"
    clock.now += DAY
    assert (await client.post(rotate)).status_code == 200  # the replaced ones expired


DAY = timedelta(hours=24)


def _iso(at: datetime) -> str:
    return at.isoformat().replace("+00:00", "Z")


def _valid(body: bytes, headers: dict[str, str], now: datetime, *secrets: str) -> set[str]:
    """Which of ``secrets`` verify the message (its timestamp checked against ``now``)."""
    valid = set()
    for secret in secrets:
        try:
            standard_webhooks.verify(secret, body, headers, now=now.timestamp())
        except standard_webhooks.WebhookVerificationError:
            continue
        valid.add(secret)
    return valid


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
async def test_an_endpoint_failing_past_the_limit_is_disabled_with_a_reason(
    client: httpx.AsyncClient, service: Service
) -> None:
    service.settings.webhooks.give_up_after_hours = 0.5 / 3600  # half a second
    await put_type(client, channels=("email",))
    async with receiving(Receiver(down=10_000)) as receiver, pushing(service):
        made = (
            await client.post(
                "/v1/webhook-endpoints", json={"url": receiver.url, "events": ["delivery.sent"]}
            )
        ).json()
        await post(client, email_to())
        async with running_dispatcher(service, ScriptedProvider()):

            async def disabled() -> dict[str, Any] | None:
                shown = (await client.get(f"/v1/webhook-endpoints/{made['id']}")).json()
                return shown if shown["status"] == "disabled" else None

            shown = await eventually(disabled, within=15)
    assert receiver.refused >= 2 and receiver.received == []
    assert "HTTP 503" in shown["disabledReason"]
    [attempt] = (await client.get(f"/v1/webhook-endpoints/{made['id']}/attempts")).json()
    assert attempt["status"] == "FAILED" and attempt["lastStatus"] == 503
    enabled = (await client.post(f"/v1/webhook-endpoints/{made['id']}/enable")).json()
    assert enabled["status"] == "active" and enabled["disabledReason"] is None


PHONE = "+15550001000"  # suppressed: each notification's SMS is skipped, then its email sent


async def both_channels(
    client: httpx.AsyncClient, count: int, kind: str = "order.confirmed"
) -> list[str]:
    """``count`` notifications of ``kind``, each a skipped SMS and then an email to send."""
    made = []
    for n in range(count):
        to = {"email": f"u{n}@example.com", "phone": PHONE}
        answer = await post(client, {"type": kind, "to": to})
        assert answer.status_code == 202, answer.text
        made.append(answer.json()["id"])
    return made


def kinds_per_notification(receiver: Receiver) -> dict[str, list[str]]:
    """Each notification's event types, in the order they were first received."""
    found: dict[str, list[str]] = {}
    for _msg_id, event in receiver.unique().items():
        found.setdefault(event["data"]["notificationId"], []).append(event["type"])
    return found


async def feed_holds(client: httpx.AsyncClient, count: int) -> bool:
    return len((await client.get("/v1/events", params={"limit": 1000})).json()["events"]) >= count


async def attempts_of(client: httpx.AsyncClient, endpoint: str) -> list[dict[str, Any]]:
    answer = await client.get(f"/v1/webhook-endpoints/{endpoint}/attempts")
    assert answer.status_code == 200, answer.text
    found: list[dict[str, Any]] = answer.json()
    return found


async def test_a_message_that_failed_for_good_goes_first_once_enabled(
    client: httpx.AsyncClient, service: Service
) -> None:
    service.settings.webhooks.give_up_after_hours = 0.5 / 3600  # half a second
    await put_type(client, channels=("email", "sms"))
    await client.put(f"/v1/suppressions/sms/{PHONE}", json={"reason": "manual"})
    both = {"url": "", "events": ["delivery.skipped", "delivery.sent"]}
    async with receiving(Receiver(down=10_000)) as receiver:
        made = await client.post("/v1/webhook-endpoints", json={**both, "url": receiver.url})
        endpoint = made.json()["id"]
        [notification] = await both_channels(client, 1)
        async with running_dispatcher(service, ScriptedProvider()):
            await eventually(lambda: feed_holds(client, 2))
        async with pushing(service):  # both messages made; the first fails for good

            async def disabled() -> bool:
                shown = (await client.get(f"/v1/webhook-endpoints/{endpoint}")).json()
                return bool(shown["status"] == "disabled")

            await eventually(disabled, within=15)
        by_type = {a["type"]: a for a in await attempts_of(client, endpoint)}
        assert by_type["delivery.skipped"]["status"] == "FAILED"
        # The later message of the notification waited behind it: never tried.
        assert (by_type["delivery.sent"]["status"], by_type["delivery.sent"]["attempts"]) == (
            "PENDING",
            0,
        )
        assert receiver.received == []

        receiver.down = 0
        async with pushing(service):
            enabled = await client.post(f"/v1/webhook-endpoints/{endpoint}/enable")
            assert enabled.json()["status"] == "active"
            await eventually(lambda: len(receiver.unique()) == 2, within=15)
    assert kinds_per_notification(receiver) == {notification: ["delivery.skipped", "delivery.sent"]}
    assert {a["status"] for a in await attempts_of(client, endpoint)} == {"SENT"}


async def test_an_endpoint_gets_only_the_notification_types_it_chose(
    client: httpx.AsyncClient, service: Service
) -> None:
    await put_type(client, channels=("email",))
    await put_type(client, "news.weekly", category="marketing", channels=("email",))
    async with receiving(Receiver()) as receiver, pushing(service):
        made = await client.post(
            "/v1/webhook-endpoints",
            json={"url": receiver.url, "events": ["delivery.sent"], "types": ["order.confirmed"]},
        )
        assert made.status_code == 201 and made.json()["types"] == ["order.confirmed"]
        news = [
            (await post(client, email_to(f"n{n}@example.com", type="news.weekly"))).json()["id"]
            for n in range(3)
        ]
        orders = [
            (await post(client, email_to(f"o{n}@example.com"))).json()["id"] for n in range(3)
        ]
        async with running_dispatcher(service, ScriptedProvider()):
            await eventually(lambda: feed_holds(client, 6))
            # Written after every one above: once it arrives, those were all looked at.
            last = (await post(client, email_to("last@example.com"))).json()["id"]
            await eventually(lambda: len(receiver.unique()) == 4, within=15)
    received = {e["data"]["notificationId"] for e in receiver.unique().values()}
    assert received == {*orders, last}
    assert not received & set(news)
    assert len(await attempts_of(client, made.json()["id"])) == 4


async def test_events_wait_out_an_endpoint_refusing_connections(
    client: httpx.AsyncClient, service: Service
) -> None:
    await put_type(client, channels=("email", "sms"))
    await client.put(f"/v1/suppressions/sms/{PHONE}", json={"reason": "manual"})
    receiver = Receiver()  # nothing listens on its port yet
    made = await client.post(
        "/v1/webhook-endpoints",
        json={"url": receiver.url, "events": ["delivery.skipped", "delivery.sent"]},
    )
    endpoint = made.json()["id"]
    async with pushing(service):
        notifications = await both_channels(client, 5)
        async with running_dispatcher(service, ScriptedProvider()):
            await eventually(lambda: feed_holds(client, 10))

            async def refused_twice() -> bool:
                tried = await attempts_of(client, endpoint)
                return any(
                    a["attempts"] >= 2 and "unreachable" in (a["lastError"] or "") for a in tried
                )

            await eventually(refused_twice, within=15)
        async with receiving(receiver):
            await eventually(lambda: len(receiver.unique()) == 10, within=30)
    assert kinds_per_notification(receiver) == {
        n: ["delivery.skipped", "delivery.sent"] for n in notifications
    }


async def test_a_notification_s_messages_go_in_the_order_of_their_events_not_ids(
    service: Service,
) -> None:
    """Ids come from the clock of the process that made each message: another dispatcher's
    (behind by a few milliseconds) may make a later event's message with the smaller id."""
    db, now = service.db, utcnow()
    endpoint = await producer_hooks.create(
        db, "default", "http://127.0.0.1:9/x", ["delivery.sent"], None, "whsec_c2VjcmV0", now
    )
    notification = new_id()
    later, earlier = new_id(), new_id()  # the later event's message has the smaller id
    rows = [
        {**_message(endpoint.id, notification, now), "id": later, "event_txid": 7, "event_id": 2},
        {**_message(endpoint.id, notification, now), "id": earlier, "event_txid": 7, "event_id": 1},
    ]
    async with db.engine.begin() as conn:
        await conn.execute(sa.insert(webhook_message), rows)
    lease = timedelta(seconds=60)
    assert [m.id for m in await producer_hooks.claim(db, 10, now, lease)] == [earlier]
    await producer_hooks.sent(db, earlier, 204, now)
    assert [m.id for m in await producer_hooks.claim(db, 10, now, lease)] == [later]


def _message(endpoint: uuid.UUID, notification: uuid.UUID, now: datetime) -> dict[str, Any]:
    return {
        "endpoint_id": endpoint,
        "order_key": notification,
        "event_type": "delivery.sent",
        "body": "{}",
        "status": producer_hooks.PENDING,
        "attempts": 0,
        "next_attempt_at": now,
        "created_at": now,
    }


async def test_a_hung_endpoint_holds_only_its_own_senders(
    client: httpx.AsyncClient, service: Service
) -> None:
    """An endpoint that takes requests and never answers (within the timeout) keeps at most
    ``per_endpoint`` senders; every other endpoint's events go on arriving meanwhile."""
    service.settings.webhooks.concurrency = 4
    service.settings.webhooks.per_endpoint = 2
    service.settings.webhooks.timeout = 60  # the hung requests outlast the test
    await put_type(client)
    released = asyncio.Event()
    hung = Receiver(hung=released)
    async with receiving(hung), receiving(Receiver()) as fine, pushing(service):
        for receiver in (hung, fine):
            body = {"url": receiver.url, "events": ["delivery.sent"]}
            assert (await client.post("/v1/webhook-endpoints", json=body)).status_code == 201
        total = 20
        for n in range(total):
            assert (await post(client, email_to(f"u{n}@example.com"))).status_code == 202
        async with running_dispatcher(service, ScriptedProvider()):
            await eventually(lambda: len(fine.unique()) == total, within=30)
        assert hung.waiting == hung.most_waiting == 2
        released.set()
        await eventually(lambda: len(hung.unique()) == total, within=30)
    assert hung.most_waiting == 2


async def test_an_endpoint_s_cursor_moves_past_events_it_did_not_choose(
    client: httpx.AsyncClient, service: Service
) -> None:
    """An endpoint waiting for rare events does not read the whole log after its cursor at
    every round: its cursor moves on over the events it does not take."""
    await put_type(client)
    await client.put("/v1/suppressions/email/gone@example.com", json={"reason": "manual"})
    body = {"url": "http://127.0.0.1:9/hooks", "events": ["delivery.bounced"]}
    created = (await client.post("/v1/webhook-endpoints", json=body)).json()
    for _ in range(10):  # ten skipped deliveries: ten events the endpoint does not take
        assert (await post(client, email_to("gone@example.com"))).status_code == 202
    newest = sa.select(sa.func.max(event_log.c.id))
    cursor = sa.select(webhook_endpoint.c.cursor_id).where(
        webhook_endpoint.c.id == uuid.UUID(created["id"])
    )

    async def moved() -> bool:
        ids = await producer_hooks.active_endpoints(service.db)
        await producer_hooks.fan_out(service.db, ids, 500, utcnow())
        async with service.db.engine.connect() as conn:
            last, at = (await conn.execute(newest)).scalar(), (await conn.execute(cursor)).scalar()
        return last is not None and at == last

    await eventually(moved)
    async with service.db.engine.connect() as conn:
        made = (
            await conn.execute(sa.select(sa.func.count()).select_from(webhook_message))
        ).scalar()
    assert made == 0
