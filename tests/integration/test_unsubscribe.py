"""One-click unsubscribe (RFC 8058): signed links in every marketing email."""

from __future__ import annotations

import base64
import json
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers import eventually, post, put_type, running_dispatcher
from tests.integration.test_campaigns import EMAIL_ONLY, _status_is, add_users, post_campaign
from tidings.policy.unsubscribe import InvalidToken, Unsubscribe, Unsubscriber
from tidings.providers.sink import SinkProvider
from tidings.service import Service
from tidings.store import reports


async def sent_message(
    client: httpx.AsyncClient, service: Service, body: dict[str, Any]
) -> dict[str, Any]:
    """Send ``body`` through the development sink and read back the file it wrote."""
    accepted = (await post(client, body)).json()
    delivery_id = accepted["deliveries"][0]["id"]
    written = Path(service.settings.outbox_dir) / "email" / f"{delivery_id}.json"
    async with running_dispatcher(service, SinkProvider(service.settings.outbox_dir)):
        await eventually(written.exists)
    message: dict[str, Any] = json.loads(written.read_text())
    return message


async def test_marketing_email_carries_both_rfc_8058_headers_and_transactional_none(
    client: httpx.AsyncClient, service: Service
) -> None:
    await put_type(client, "promo", category="marketing", priority="low", channels=("email",))
    await put_type(client, "receipt", channels=("email",))
    to = {"email": "fan@example.com"}
    promo = await sent_message(client, service, {"type": "promo", "userId": "fan", "to": to})
    receipt = await sent_message(client, service, {"type": "receipt", "userId": "fan", "to": to})
    headers = promo["headers"]
    assert headers["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    link = headers["List-Unsubscribe"].strip("<>")
    assert link.startswith(f"{service.settings.public_url}/u/")
    assert promo["unsubscribe_url"] == link  # the same link, for a visible footer
    assert receipt["headers"] == {} and receipt["unsubscribe_url"] is None


def link_token(service: Service, user: str | None = "fan", address: str | None = None) -> str:
    request = Unsubscribe("marketing", "email", user, address)
    return service.unsubscriber.token(request)


async def marketing_email_on(client: httpx.AsyncClient) -> bool:
    shown = (await client.get("/v1/users/fan/preferences")).json()
    return bool(shown["categories"]["marketing"]["email"])


async def test_get_only_asks_and_post_switches_the_category_off(
    client: httpx.AsyncClient, service: Service
) -> None:
    await client.put("/v1/users/fan/preferences", json={})
    token = link_token(service)
    page = await client.get(f"/u/{token}")
    assert page.status_code == 200 and '<form method="post"' in page.text
    assert await marketing_email_on(client)  # a link scanner's GET changes nothing
    done = await client.post(f"/u/{token}", data={"List-Unsubscribe": "One-Click"})
    assert done.status_code == 200 and "no longer receive marketing" in done.text
    assert not await marketing_email_on(client)
    shown = (await client.get("/v1/users/fan/preferences")).json()
    assert shown["categories"]["marketing"]["push"] is True  # only that channel


async def test_forged_or_altered_tokens_are_rejected(
    client: httpx.AsyncClient, service: Service
) -> None:
    await client.put("/v1/users/fan/preferences", json={})
    token = link_token(service)
    altered = token[:-1] + ("A" if token[-1] != "A" else "B")
    other = Unsubscriber("another-secret", "http://x").token(
        Unsubscribe("marketing", "email", "fan")
    )
    # Another user's payload under this token's signature.
    payload = base64.urlsafe_b64encode(b'["marketing","email","eve",null]').rstrip(b"=")
    swapped = f"{payload.decode()}.{token.rsplit('.', 1)[1]}"
    for bad in (altered, other, "not-a-token", swapped):
        assert (await client.post(f"/u/{bad}")).status_code == 400, bad
        assert (await client.get(f"/u/{bad}")).status_code == 400, bad
    assert await marketing_email_on(client)
    with pytest.raises(InvalidToken):
        service.unsubscriber.read(altered)


async def test_an_address_without_a_user_is_suppressed(
    client: httpx.AsyncClient, service: Service
) -> None:
    token = link_token(service, user=None, address="Fan@Example.com")
    assert (await client.post(f"/u/{token}")).status_code == 200
    shown = await client.get("/v1/suppressions/email/fan@example.com")
    assert shown.status_code == 200 and shown.json()["reason"] == "unsubscribe"


async def history_of(client: httpx.AsyncClient, message: dict[str, Any]) -> list[str]:
    shown = (await client.get(f"/v1/notifications/{message['notification_id']}")).json()
    (found,) = [d for d in shown["deliveries"] if d["id"] == message["delivery_id"]]
    return [entry["kind"] for entry in found["history"]]


async def unsubscribed_in_report(
    client: httpx.AsyncClient, service: Service, campaign: str, count: int
) -> dict[str, Any] | None:
    # PostgreSQL shows an event once every older transaction on the server has ended.
    while await reports.fold(service.db):
        pass
    shown: dict[str, Any] = (await client.get(f"/v1/campaigns/{campaign}/report")).json()
    return shown if shown["unsubscribed"] >= count else None


async def test_an_unsubscribe_through_a_messages_link_counts_in_its_reports(
    client: httpx.AsyncClient, service: Service
) -> None:
    await put_type(client, "sale", **EMAIL_ONLY)
    await add_users(client, 3)
    answer = await post_campaign(client, {"type": "sale", "audience": {"topic": "artist:77"}})
    campaign = answer.json()["campaignId"]
    outbox = Path(service.settings.outbox_dir)
    async with running_dispatcher(service, SinkProvider(outbox)):
        await eventually(lambda: _status_is(client, campaign, "DONE"), within=20, interval=0.1)
    messages = sorted(
        (json.loads(path.read_text()) for path in (outbox / "email").glob("*.json")),
        key=lambda message: str(message["user_id"]),
    )
    assert len(messages) == 3
    for message in messages:
        link = message["unsubscribe_url"]
        assert message["headers"]["List-Unsubscribe"] == f"<{link}>"
        wanted = service.unsubscriber.read(link.rsplit("/", 1)[1])
        assert wanted.delivery_id == uuid.UUID(message["delivery_id"])
        assert wanted.user_id == message["user_id"]

    public = service.settings.public_url
    first, second, _ = (m["unsubscribe_url"].removeprefix(public) for m in messages)
    for path in (first, first, second):  # the first link used twice: one unsubscribe
        assert (await client.post(path)).status_code == 200
    assert (await history_of(client, messages[0])).count("unsubscribed") == 1
    assert (await history_of(client, messages[1])).count("unsubscribed") == 1
    assert "unsubscribed" not in await history_of(client, messages[2])
    shown = (await client.get(f"/v1/users/{messages[0]['user_id']}/preferences")).json()
    assert shown["categories"]["marketing"]["email"] is False

    report = await eventually(lambda: unsubscribed_in_report(client, service, campaign, 2))
    assert report["unsubscribed"] == 2 and report["sent"] == 3
    assert report["rates"]["unsubscribed"] == round(2 / 3, 4)
    typed = (await client.get("/v1/types/sale/report")).json()
    assert typed["unsubscribed"] == 2


async def test_a_link_names_its_delivery_under_its_signature(
    client: httpx.AsyncClient, service: Service
) -> None:
    await client.put("/v1/users/fan/preferences", json={})
    delivery = uuid.uuid4()
    token = service.unsubscriber.token(Unsubscribe("marketing", "email", "fan", None, delivery))
    assert service.unsubscriber.read(token).delivery_id == delivery
    assert service.unsubscriber.read(link_token(service)).delivery_id is None  # an old link
    # Another delivery's id under this link's signature.
    forged = json.dumps(["marketing", "email", "fan", None, uuid.uuid4().hex]).encode()
    payload = base64.urlsafe_b64encode(forged).rstrip(b"=").decode()
    swapped = f"{payload}.{token.rsplit('.', 1)[1]}"
    assert (await client.post(f"/u/{swapped}")).status_code == 400
    assert await marketing_email_on(client)
    # A delivery that is not there (gone with retention) still unsubscribes.
    assert (await client.post(f"/u/{token}")).status_code == 200
    assert not await marketing_email_on(client)
