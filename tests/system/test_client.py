"""``tidings.client`` against a real ``tidings serve`` (one per module, SQLite): sends and
status, sync and async, batches, campaigns, preferences, templates, errors, and retries
through a misbehaving TCP proxy that is not duplicated.

Every test uses names (types, business ids, users) of its own, so they share the server
without depending on each other.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import select
import socket
import socketserver
import sqlite3
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import run_blocking
from tests.helpers import eventually
from tests.processes import free_port, tidings_env, tidings_processes, wait_ready
from tidings.client import (
    KEEP,
    AsyncClient,
    Audience,
    Backoff,
    Client,
    Conflict,
    InvalidRequest,
    MissingIdempotencyKey,
    NewCampaign,
    NotFound,
    Notification,
    Profile,
    QuietHours,
    RateLimited,
    Recipient,
    ServerError,
    TidingsConnectionError,
    TypeDefinition,
    key_from_business_id,
)
from tidings.client.retrying import retry_after

FAST = Backoff(base=0.01, cap=0.05)
SHIPPED = "client.order.shipped"
PROMO = "client.promo"


@dataclass(frozen=True)
class Server:
    url: str
    port: int
    database: Path

    def notifications_with_key(self, key: str) -> int:
        """Rows in the server's own database: the proof that a retry made no second one."""
        with contextlib.closing(sqlite3.connect(f"file:{self.database}?mode=ro", uri=True)) as db:
            (count,) = db.execute(
                "SELECT count(*) FROM notification WHERE idempotency_key = ?", (key,)
            ).fetchone()
        return int(count)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    workdir = tmp_path_factory.mktemp("client")
    port = free_port()
    database = workdir / "tidings.db"
    env = tidings_env(
        database_url=f"sqlite:///{database}",
        secret_key="test-secret",
        campaigns__poll_interval=0.2,
    )
    with tidings_processes(env, workdir) as processes:
        process = processes.start("serve", ["serve", "--port", str(port)])
        url = f"http://127.0.0.1:{port}"
        run_blocking(wait_ready(url, process))
        with Client(url) as client:
            email_and_sms = TypeDefinition("transactional", "normal", ["email", "sms"])
            client.put_type(SHIPPED, email_and_sms)
            client.put_template(SHIPPED, "email", "en", subject="Shipped", text="{{ order }}")
            client.put_template(SHIPPED, "sms", "en", text="Order {{ order }} shipped")
            client.put_type(PROMO, TypeDefinition("marketing", "normal", ["email"]))
            client.put_template(PROMO, "email", "en", subject="Sale", text="{{ what }}")
        yield Server(url, port, database)
        assert process.stop() == 0, process.log_tail()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def shipped(business_id: str | None, **changes: Any) -> Notification:
    to = Recipient(email="ana@example.com")
    sent = Notification(SHIPPED, to=to, data={"order": 7}, business_id=business_id)
    return dataclasses.replace(sent, **changes)


class Counted:
    """An httpx client of ours that counts the requests the tidings client makes."""

    def __init__(self) -> None:
        self.requests: list[httpx.Request] = []

    def http(self) -> httpx.Client:
        """Closed by the caller: a client given to ``Client`` stays the caller's."""
        return httpx.Client(timeout=5, event_hooks={"request": [self.requests.append]})


# Sending and reading back


def test_send_and_status(server: Server) -> None:
    with Client(server.url) as client:
        accepted = client.send(shipped(unique("order"), channels=["email"]))
        assert (accepted.status, accepted.replayed) == ("accepted", False)
        assert [(d.channel, d.status) for d in accepted.deliveries] == [("email", "PENDING")]

        def sent() -> bool:
            status = client.get_notification(accepted.id)
            return status.deliveries[0].status == "SENT"

        run_blocking(eventually(sent, within=10))
        status = client.get_notification(accepted.id)
    assert (status.id, status.type, status.category) == (accepted.id, SHIPPED, "transactional")
    assert status.idempotency_key == accepted.idempotency_key
    (delivery,) = status.deliveries
    assert delivery.id == accepted.deliveries[0].id
    assert delivery.address == "a***@example.com" and delivery.template_version == 1
    assert [entry.kind for entry in delivery.history] == ["accepted", "sent"]
    assert delivery.sent_at is not None and delivery.sent_at.tzinfo is not None


async def test_async_send_and_status(server: Server) -> None:
    async with AsyncClient(server.url) as client:
        accepted = await client.send(shipped(unique("order")))
        assert sorted(d.channel for d in accepted.deliveries) == ["email", "sms"]
        # No phone: the SMS delivery is skipped at accept, and the status says why.
        status = await client.get_notification(accepted.id)
    by_channel = {d.channel: d for d in status.deliveries}
    assert by_channel["sms"].status == "SKIPPED"
    assert by_channel["sms"].skip_reason == "no_address"
    assert by_channel["email"].status in ("PENDING", "SENDING", "SENT")


def test_search_pages_a_users_notifications_newest_first(server: Server) -> None:
    user = unique("user")
    address = f"{user}@example.com"
    with Client(server.url) as client:
        sent = [
            client.send(
                shipped(unique("order"), user_id=user, to=Recipient(email=address)),
            ).id
            for _ in range(3)
        ]
        first = client.search_notifications(address=address, limit=2)
        second = client.search_notifications(address=address, limit=2, after=first.next)
    assert [n.id for n in first.notifications + second.notifications] == sent[::-1]
    assert second.next is None
    found = first.notifications[0]
    assert (found.user_id, found.type) == (user, SHIPPED)
    email = next(d for d in found.deliveries if d.channel == "email")
    assert email.address != address and email.address.endswith("@example.com")


async def test_async_search_by_user_and_time(server: Server) -> None:
    user = unique("user")
    async with AsyncClient(server.url) as client:
        await client.send(shipped(unique("order"), user_id=user))
        await asyncio.sleep(0.01)  # the next id is made in a later millisecond than since
        since = datetime.now(UTC)
        later = await client.send(shipped(unique("order"), user_id=user))
        page = await client.search_notifications(user_id=user, start=since)
        everything = await client.search_notifications(user_id=user, channel="email")
    assert [n.id for n in page.notifications] == [later.id]
    assert len(everything.notifications) == 2


def test_users_imported_listed_and_erased(server: Server) -> None:
    prefix = unique("imp")
    users = [(f"{prefix}-{n}", Profile(email=f"{prefix}{n}@example.com")) for n in range(3)]
    with Client(server.url) as client:
        imported = client.put_users(users)
        again = client.put_users(users[:1])
        first = client.list_users(id_prefix=prefix, limit=2)
        rest = client.list_users(id_prefix=prefix, limit=2, after=first.next)
        erased = client.erase_user(users[0][0])
        left = client.list_users(id_prefix=prefix)
    assert (imported.created, imported.replaced, again.replaced) == (3, 0, 1)
    assert [u.id for u in first.users + rest.users] == [u for u, _ in users]
    assert rest.next is None
    assert erased.profile and erased.user_id == users[0][0]
    assert [u.id for u in left.users] == [u for u, _ in users[1:]]


async def test_async_users_by_attribute(server: Server) -> None:
    prefix = unique("attr")
    pro = Profile(attributes={"plan": "pro"})
    async with AsyncClient(server.url) as client:
        await client.put_users([(f"{prefix}-a", pro), (f"{prefix}-b", Profile())])
        page = await client.list_users(id_prefix=prefix, attribute="plan", equals="pro")
    assert [u.id for u in page.users] == [f"{prefix}-a"]


def test_the_same_business_id_twice_is_one_notification_marked_replayed(server: Server) -> None:
    business_id = unique("order") + ":shipped"
    with Client(server.url) as client:
        first = client.send(shipped(business_id))
        second = client.send(shipped(business_id))
        # Another type with the same business id is another notification.
        promo = Notification(PROMO, to=Recipient(email="ana@example.com"), business_id=business_id)
        other = client.send(promo)
    assert (first.replayed, second.replayed) == (False, True)
    assert second.id == first.id
    assert [d.id for d in second.deliveries] == [d.id for d in first.deliveries]
    assert first.idempotency_key == f"{SHIPPED}/{business_id}"
    assert other.id != first.id and not other.replayed
    assert server.notifications_with_key(first.idempotency_key) == 1


def test_an_explicit_key_is_sent_as_given(server: Server) -> None:
    key = unique("explicit key")
    with Client(server.url) as client:
        accepted = client.send(shipped(business_id=None, idempotency_key=key))
        assert client.get_notification(accepted.id).idempotency_key == key


def test_a_batch_answers_each_item_in_order(server: Server) -> None:
    ids = [unique("batch") for _ in range(3)]
    bad = Notification(SHIPPED, to=Recipient(email="not-an-email"), business_id=ids[1])
    items = [shipped(ids[0]), bad, shipped(ids[2], channels=["email"])]
    with Client(server.url) as client:
        result = client.send_batch(items)
        again = client.send_batch(items)
    assert [item.status for item in result.items] == ["accepted", "error", "accepted"]
    assert [item.idempotency_key for item in result.items] == [n.key() for n in items]
    (refused,) = result.refused
    assert refused.error is not None and refused.error.field == "to.email"
    assert refused.id is None and refused.index == 1
    assert [item.id for item in again.accepted] == [item.id for item in result.accepted]
    assert [len(item.deliveries) for item in result.accepted] == [2, 1]


# Campaigns, preferences, templates


def test_a_campaign_round_trip(server: Server) -> None:
    users = [unique("fan"), unique("fan")]
    audience = Audience.users(users)
    later = datetime.now(UTC) + timedelta(hours=1)
    with Client(server.url) as client:
        for user in users:
            client.put_user(user, Profile(email=f"{user}@example.com"))
        campaign = NewCampaign(
            PROMO,
            audience,
            name="presale",
            data={"what": "tickets"},
            send_at=later,
            spread_over=timedelta(minutes=30),
            business_id=unique("presale"),
        )
        forecast = client.dry_run_campaign(campaign)
        created = client.create_campaign(campaign)
        assert client.create_campaign(campaign).id == created.id  # same key, same campaign
        shown = client.get_campaign(created.id)
        listed = client.list_campaigns(limit=500)
        cancelled = client.cancel_campaign(created.id)
        after = client.get_campaign(created.id)
    assert forecast.audience_size == 2 and forecast.channels[0].would_send == 2
    assert created.status == "SCHEDULED"
    assert (shown.name, shown.type, shown.audience) == ("presale", PROMO, {"userIds": 2})
    assert shown.spread_seconds == 1800 and shown.send_at == later
    assert created.id in [c.id for c in listed.campaigns]
    assert (cancelled.campaign_id, cancelled.status, cancelled.in_progress) == (
        created.id,
        "CANCELLED",
        0,
    )
    assert after.status == "CANCELLED"


def test_preferences_are_set_and_read(server: Server) -> None:
    user = unique("ana")
    with Client(server.url) as client:
        client.put_user(user, Profile(email="ana@example.com", timezone="America/Sao_Paulo"))
        night = QuietHours("22:00", "07:00")
        chosen = client.set_preferences(user, {"marketing": {"email": False}}, quiet_hours=night)
        read = client.get_preferences(user)
        reset = client.set_preferences(user, {}, quiet_hours=None, locale=KEEP)
        with pytest.raises(NotFound) as missing:
            client.get_preferences(unique("nobody"))
    assert chosen == read
    assert read.categories["marketing"]["email"] is False
    assert read.categories["transactional"]["email"] is True
    assert (read.quiet_hours, read.timezone) == (night, "America/Sao_Paulo")
    assert reset.quiet_hours is None and reset.categories["marketing"]["email"] is True
    assert reset.timezone == "America/Sao_Paulo"  # not given: kept
    assert (missing.value.status_code, missing.value.field) == (404, "userId")


def test_templates_versions_and_preview(server: Server) -> None:
    kind = unique("client.tpl")
    with Client(server.url) as client:
        client.put_type(kind, TypeDefinition("transactional", "high", ["email"]))
        first = client.put_template(kind, "email", "en", subject="Hi {{ name }}", text="v1")
        same = client.put_template(kind, "email", "en", subject="Hi {{ name }}", text="v1")
        second = client.put_template(kind, "email", "en", subject="Hi {{ name }}", text="v2")
        newest = client.get_template(kind, "email", "en")
        versions = client.template_versions(kind, "email", "en")
        listed = client.list_templates(kind)
        shown = client.preview(kind, data={"name": "Ana"})
        with pytest.raises(InvalidRequest) as refused:
            client.put_template(kind, "email", "en", subject="{{ ''.__class__ }}")
        with pytest.raises(NotFound):
            client.get_template(kind, "email", "pt")
    assert (first.created, first.template.version) == (True, 1)
    assert (same.created, same.template.version) == (False, 1)
    assert (second.created, second.template.version) == (True, 2)
    assert newest == second.template and newest.text == "v2"
    assert [t.version for t in versions] == [2, 1]
    assert [(t.channel, t.locale, t.version) for t in listed] == [("email", "en", 2)]
    assert (shown["email"].subject, shown["email"].version, shown["email"].error) == (
        "Hi Ana",
        2,
        None,
    )
    assert refused.value.status_code == 422


# Errors


def test_errors_carry_status_code_and_field(server: Server) -> None:
    counted = Counted()
    with counted.http() as http, Client(server.url, http_client=http) as client:
        with pytest.raises(InvalidRequest) as invalid:
            client.send(Notification(SHIPPED, to=Recipient(email="nope"), business_id="x"))
        assert len(counted.requests) == 1  # a 4xx is not retried
        with pytest.raises(InvalidRequest) as unknown:
            client.send(Notification("client.nope", user_id="ana", business_id="x"))
        with pytest.raises(NotFound) as missing:
            client.get_notification(str(uuid.uuid4()))
        key = unique("conflict")
        client.send(shipped(business_id=None, idempotency_key=key))
        with pytest.raises(Conflict) as conflict:
            client.send(shipped(business_id=None, idempotency_key=key, data={"order": 8}))
    error = invalid.value
    assert (error.status_code, error.code, error.field) == (422, "invalid_request", "to.email")
    assert error.idempotency_key == f"{SHIPPED}/x" and "to.email" in str(error)
    assert (unknown.value.code, unknown.value.field) == ("unknown_type", "type")
    assert (missing.value.status_code, missing.value.code) == (404, "not_found")
    assert (conflict.value.status_code, conflict.value.code) == (409, "idempotency_key_reused")
    assert conflict.value.field == "Idempotency-Key"


def test_a_send_without_a_key_is_refused_before_any_request(server: Server) -> None:
    counted = Counted()
    with counted.http() as http, Client(server.url, http_client=http) as client:
        with pytest.raises(MissingIdempotencyKey) as refused:
            client.send(Notification(SHIPPED, user_id="ana"))
        with pytest.raises(MissingIdempotencyKey):
            client.send_batch([shipped("a"), Notification(SHIPPED, user_id="ana")])
        with pytest.raises(MissingIdempotencyKey):
            client.create_campaign(NewCampaign(PROMO, Audience.topic("t")))
    assert counted.requests == []
    assert "business_id" in str(refused.value) and refused.value.field == "Idempotency-Key"


def test_the_api_key_goes_as_a_bearer_token(server: Server) -> None:
    counted = Counted()
    with counted.http() as http, Client(server.url, api_key="tdk_x", http_client=http) as client:
        client.get_type(SHIPPED)
    assert counted.requests[0].headers["Authorization"] == "Bearer tdk_x"


# Retries, through a proxy that loses or refuses the first request


@dataclass
class Proxy:
    """A TCP proxy to the server. Each connection takes the next step of ``plan``, then
    relays bytes both ways: ``lose_answer`` forwards the request and reads the server's
    answer, then closes the client's connection without a byte of it; ``answer <status>
    <retry-after>`` answers itself and never reaches the server."""

    target: int
    plan: list[str]
    connections: int = 0
    withheld: list[bytes] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def step(self) -> str:
        with self._lock:
            self.connections += 1
            return self.plan.pop(0) if self.plan else "relay"


def _read_request(sock: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        (
            int(line.split(b":")[1])
            for line in head.lower().split(b"\r\n")[1:]
            if line.startswith(b"content-length:")
        ),
        0,
    )
    while len(body) < length and (chunk := sock.recv(65536)):
        body += chunk
    return head + b"\r\n\r\n" + body


def _relay(a: socket.socket, b: socket.socket) -> None:
    while True:
        readable, _, _ = select.select([a, b], [], [], 30)
        if not readable:
            return
        for sock in readable:
            chunk = sock.recv(65536)
            if not chunk:
                return
            (b if sock is a else a).sendall(chunk)


def _answer(status: int, wait: str) -> bytes:
    body = b'{"error": {"code": "unavailable", "message": "try again", "field": null}}'
    head = (
        f"HTTP/1.1 {status} Unavailable\r\nRetry-After: {wait}\r\nConnection: close\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


def _serve_one(proxy: Proxy, client: socket.socket) -> None:
    step = proxy.step()
    if step.startswith("answer"):
        _read_request(client)
        _, status, wait = step.split()
        client.sendall(_answer(int(status), wait))
        return
    with socket.create_connection(("127.0.0.1", proxy.target)) as upstream:
        if step == "relay":
            _relay(client, upstream)
            return
        upstream.sendall(_read_request(client))
        answer = b""
        while b"\r\n\r\n" not in answer and (chunk := upstream.recv(65536)):
            answer += chunk
        proxy.withheld.append(answer)  # the server committed and answered; the client sees none


@contextlib.contextmanager
def proxy_to(server: Server, *plan: str) -> Iterator[tuple[Proxy, str]]:
    proxy = Proxy(server.port, list(plan))

    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            _serve_one(proxy, self.request)

    listener = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
    listener.daemon_threads = True
    # A short poll: shutdown() waits for serve_forever to notice it.
    thread = threading.Thread(target=listener.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield proxy, f"http://127.0.0.1:{listener.server_address[1]}"
    finally:
        listener.shutdown()
        listener.server_close()
        thread.join(5)


def test_a_send_whose_answer_was_lost_is_retried_and_not_duplicated(server: Server) -> None:
    with proxy_to(server, "lose_answer") as (proxy, url), Client(url, backoff=FAST) as client:
        accepted = client.send(shipped(unique("lost")))
    assert proxy.connections == 2
    (withheld,) = proxy.withheld
    assert withheld.startswith(b"HTTP/1.1 202")  # the first attempt was committed
    assert accepted.replayed  # the retry, with the same key, was answered that notification
    assert server.notifications_with_key(accepted.idempotency_key) == 1
    with Client(server.url) as direct:
        status = direct.get_notification(accepted.id)
    assert status.idempotency_key == accepted.idempotency_key


@pytest.mark.parametrize("status", [503, 429])
async def test_a_refused_attempt_is_retried_after_its_retry_after(
    server: Server, status: int
) -> None:
    with proxy_to(server, f"answer {status} 0") as (proxy, url):
        async with AsyncClient(url, backoff=FAST) as client:
            accepted = await client.send(shipped(unique("busy")))
    assert proxy.connections == 2 and not accepted.replayed
    assert server.notifications_with_key(accepted.idempotency_key) == 1


def test_a_retry_after_beyond_the_bound_ends_the_retries(server: Server) -> None:
    patient = Backoff(base=0.01, max_retry_after=5)
    with proxy_to(server, "answer 503 120", "answer 429 120") as (proxy, url):
        with Client(url, backoff=patient) as client:
            with pytest.raises(ServerError) as unavailable:
                client.send(shipped(unique("later")))
            with pytest.raises(RateLimited) as limited:
                client.get_type(SHIPPED)
    assert proxy.connections == 2  # neither was retried
    assert (unavailable.value.status_code, unavailable.value.retry_after) == (503, 120)
    assert unavailable.value.code == "unavailable" and unavailable.value.idempotency_key
    assert limited.value.status_code == 429


def test_no_answer_after_every_retry_is_a_connection_error() -> None:
    counted = Counted()
    nowhere = f"http://127.0.0.1:{free_port()}"
    with counted.http() as http, pytest.raises(TidingsConnectionError) as failed:
        Client(nowhere, retries=2, backoff=FAST, http_client=http).send(shipped("order-1"))
    assert len(counted.requests) == 3
    assert {r.headers["Idempotency-Key"] for r in counted.requests} == {f"{SHIPPED}/order-1"}
    assert failed.value.idempotency_key == f"{SHIPPED}/order-1"
    assert failed.value.status_code is None and "3 attempt(s)" in str(failed.value)


# Without a server


def test_importing_the_client_loads_none_of_the_server() -> None:
    probe = (
        "import sys, tidings.client\n"
        "print(sorted(m for m in sys.modules if m.startswith(('tidings', 'fastapi', 'pydantic',"
        " 'sqlalchemy')) and not m.startswith('tidings.client')))"
    )
    shown = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    )
    assert shown.stdout.strip() == "['tidings']"  # the package's __init__: its version only


def test_keys_from_business_ids() -> None:
    assert key_from_business_id("order.shipped", "order-1234") == "order.shipped/order-1234"
    assert key_from_business_id("a", "x") != key_from_business_id("b", "x")
    hashed = [
        key_from_business_id("order.shipped", business_id)
        for business_id in ("x" * 300, "pedido-ação", " padded ", "~literal", "line\nbreak")
    ]
    assert all(key.startswith("order.shipped/~") and len(key) == 79 for key in hashed)
    assert len(set(hashed)) == len(hashed)
    assert key_from_business_id("order.shipped", "x" * 300) == hashed[0]  # deterministic
    longest = key_from_business_id("t" * 100, "y" * 154)
    assert len(longest) == 255 and longest.endswith("y")
    assert key_from_business_id("Not A Type", "x").startswith("~")
    with pytest.raises(ValueError):
        key_from_business_id("order.shipped", "")
    with pytest.raises(ValueError):
        Notification(SHIPPED, business_id="a", idempotency_key="b").key()


def test_retry_after_is_read_as_seconds_or_a_date() -> None:
    now = datetime(2025, 1, 1, tzinfo=UTC)

    def read(value: str) -> float | None:
        return retry_after(httpx.Response(503, headers={"Retry-After": value}), now)

    assert read("3") == 3.0
    assert read("Wed, 01 Jan 2025 00:00:30 GMT") == 30.0
    assert read("soon") is None
    assert retry_after(httpx.Response(503)) is None
