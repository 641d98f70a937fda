"""One-click unsubscribe (RFC 8058): signed links in every marketing email."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers import eventually, post, put_type, running_dispatcher
from tidings.policy.unsubscribe import InvalidToken, Unsubscribe, Unsubscriber
from tidings.providers.sink import SinkProvider
from tidings.service import Service


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
