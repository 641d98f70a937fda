"""``tidings.client``'s calls about people and operations against a real ``tidings serve``
(one per module, SQLite): devices, topics, suppressions, inbox tokens, inbound replies,
workflows' cancel and engagement, dead letters, events, webhook endpoints, reports,
campaign resume and providers, sync and async.

Every test uses names of its own, so they share the server without depending on each other.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from tests.conftest import run_blocking
from tests.helpers import eventually
from tests.processes import free_port, tidings_env, tidings_processes, wait_ready
from tidings.client import (
    AsyncClient,
    Audience,
    Client,
    DeadLetter,
    NewCampaign,
    NotFound,
    Notification,
    Profile,
    Recipient,
    TypeDefinition,
)

SHIPPED = "ops.order.shipped"
BROKEN = "ops.broken"  # its template names a variable no notification gives: poison


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    workdir = tmp_path_factory.mktemp("client-operations")
    port = free_port()
    env = tidings_env(
        database_url=f"sqlite:///{workdir / 'tidings.db'}",
        secret_key="test-secret",
        campaigns__poll_interval=0.2,
        webhooks__allow_private=True,  # the endpoint test registers a loopback URL
    )
    with tidings_processes(env, workdir) as processes:
        process = processes.start("serve", ["serve", "--port", str(port)])
        served = f"http://127.0.0.1:{port}"
        run_blocking(wait_ready(served, process))
        with Client(served) as client:
            client.put_type(SHIPPED, TypeDefinition("transactional", "normal", ["email"]))
            client.put_template(SHIPPED, "email", "en", subject="Shipped", text="{{ order }}")
            client.put_type(BROKEN, TypeDefinition("transactional", "normal", ["email"]))
            client.put_template(BROKEN, "email", "en", subject="Oops", text="{{ nowhere }}")
        yield served
        assert process.stop() == 0, process.log_tail()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_devices_registered_listed_and_deleted(url: str) -> None:
    user, token = unique("ana"), unique("token")
    with Client(url) as client:
        client.put_user(user, Profile(email="ana@example.com"))
        device = client.register_device(user, "android", token)
        assert (device.user_id, device.platform, device.token, device.active) == (
            user,
            "android",
            token,
            True,
        )
        assert client.get_device(token) == device
        assert [d.token for d in client.list_devices(user)] == [token]
        client.delete_device(token)
        with pytest.raises(NotFound):
            client.get_device(token)
        assert client.list_devices(user) == []


def test_topics_followed_and_left(url: str) -> None:
    topic, ana, bob = unique("artist"), unique("ana"), unique("bob")
    with Client(url) as client:
        added = client.subscribe(topic, [ana, bob])
        assert (added.topic, added.added, added.subscribers) == (topic, 2, 2)
        assert client.subscribe(topic, [ana]).added == 0
        assert client.user_topics(ana) == [topic]
        client.unsubscribe(topic, ana)
        assert client.get_topic(topic).subscribers == 1
        assert client.user_topics(ana) == []
        with pytest.raises(NotFound):
            client.unsubscribe(topic, ana)


def test_suppressions_and_replies(url: str) -> None:
    address = f"{unique('gone')}@example.com"
    with Client(url) as client:
        made = client.suppress("email", address, reason="complaint")
        assert (made.channel, made.address, made.reason) == ("email", address, "complaint")
        assert client.get_suppression("email", address).reason == "complaint"
        client.unsuppress("email", address)
        with pytest.raises(NotFound):
            client.get_suppression("email", address)
        assert client.inbound_replies(limit=5) == []


def test_an_inbox_token_for_a_registered_user(url: str) -> None:
    user = unique("ana")
    with Client(url) as client:
        client.put_user(user, Profile(email="ana@example.com"))
        token = client.inbox_token(user)
        assert token.user_id == user and token.token
        assert token.expires_at > datetime.now(UTC)
        with pytest.raises(NotFound):
            client.inbox_token(unique("nobody"))


def sent_email(client: Client, type_name: str, order: object) -> str:
    """A notification's email delivery id, once its attempt is over (SENT or FAILED)."""
    to = Recipient(email="ana@example.com")
    notification = Notification(type_name, to=to, data={"order": order}, business_id=unique("o"))
    accepted = client.send(notification)

    def done() -> bool:
        (delivery,) = client.get_notification(accepted.id).deliveries
        return delivery.status in ("SENT", "FAILED")

    run_blocking(eventually(done, within=15))
    return client.get_notification(accepted.id).deliveries[0].id


def test_engagement_cancel_and_a_types_report(url: str) -> None:
    with Client(url) as client:
        delivery_id = sent_email(client, SHIPPED, 1)
        recorded = client.record_engagement(delivery_id, "opened")
        assert (recorded.delivery_id, recorded.event) == (delivery_id, "opened")
        assert client.cancel_notifications(unique("no-such-key")) == 0
        # Reports are counted as outcomes are written, a moment after the status.
        run_blocking(eventually(lambda: client.type_report(SHIPPED).sent >= 1, within=15))
        assert client.type_report(SHIPPED).rates.delivered is not None
        with pytest.raises(NotFound):
            client.type_report(unique("no.such.type"))


def test_dead_letters_listed_and_replayed(url: str) -> None:
    with Client(url) as client:
        delivery_id = sent_email(client, BROKEN, 2)
        (letter,) = [d for d in client.dead_letters(type=BROKEN) if d.id == delivery_id]
        assert isinstance(letter, DeadLetter)
        assert (letter.channel, letter.failure_kind) == ("email", "poison")
        assert client.dead_letters(type=BROKEN, kinds=["exhausted"]) == []
        assert client.replay_delivery(delivery_id).status == "PENDING"

        def failed_again() -> bool:
            return any(d.id == delivery_id for d in client.dead_letters(type=BROKEN))

        run_blocking(eventually(failed_again, within=15))
        replayed = client.replay_dead_letters(type=BROKEN, error="nowhere", limit=1)
        assert replayed.replayed == 1


def test_events_page_with_a_cursor(url: str) -> None:
    with Client(url) as client:
        delivery_id = sent_email(client, SHIPPED, 3)

        def sent_event() -> bool:
            page = client.events(types=["delivery.sent"], limit=1000)
            return any(e.data.get("deliveryId") == delivery_id for e in page.events)

        run_blocking(eventually(sent_event, within=15))
        first = client.events(limit=1)
        assert len(first.events) == 1 and first.next is not None
        after = client.events(after=first.next, limit=1000)
        assert first.events[0].id not in [e.id for e in after.events]


def test_webhook_endpoints_round_trip(url: str) -> None:
    with Client(url) as client:
        made = client.create_webhook_endpoint(
            "http://127.0.0.1:9/hooks", ["delivery.sent"], types=[SHIPPED]
        )
        assert made.secret is not None and made.types == (SHIPPED,)
        found = client.get_webhook_endpoint(made.id)
        assert (found.url, found.events, found.secret) == (made.url, ("delivery.sent",), None)
        assert made.id in [e.id for e in client.list_webhook_endpoints()]
        rotated = client.rotate_webhook_secret(made.id)
        assert rotated.secret != made.secret
        assert client.enable_webhook_endpoint(made.id).status == "active"
        assert isinstance(client.webhook_attempts(made.id, limit=10), list)
        client.delete_webhook_endpoint(made.id)
        with pytest.raises(NotFound):
            client.get_webhook_endpoint(made.id)


def test_a_campaigns_report_and_resume(url: str) -> None:
    user = unique("ana")
    with Client(url) as client:
        client.put_user(user, Profile(email="ana@example.com"))
        campaign = NewCampaign(SHIPPED, Audience.users([user]), business_id=unique("c"))
        created = client.create_campaign(campaign)
        report = client.campaign_report(created.id)
        assert report.sent + report.skipped <= 1
        assert client.resume_campaign(created.id).id == created.id  # not paused: as it is
        with pytest.raises(NotFound):
            client.campaign_report(str(uuid.uuid4()))


def test_providers_show_the_accounts(url: str) -> None:
    with Client(url) as client:
        shown = client.providers()
    assert shown.accounts and "email" in shown.chains
    assert {a.deactivation_guard.state for a in shown.accounts} <= {"clear", "tripped", "probing"}


async def test_the_async_client_has_the_same_calls(url: str) -> None:
    user, topic, token = unique("ana"), unique("artist"), unique("token")
    async with AsyncClient(url) as client:
        await client.put_user(user, Profile(email="ana@example.com"))
        await client.register_device(user, "ios", token)
        assert [d.token for d in await client.list_devices(user)] == [token]
        assert (await client.subscribe(topic, [user])).subscribers == 1
        assert await client.user_topics(user) == [topic]
        assert (await client.inbox_token(user)).user_id == user
        assert len((await client.events(limit=1)).events) <= 1
        assert isinstance(await client.dead_letters(limit=1), list)
        assert (await client.providers()).accounts
