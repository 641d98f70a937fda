"""The provider contract, receiving: every provider with callbacks, through tidings' API.

A message is sent for real (API, dispatcher, adapter, simulator); then the provider's
callback saying it was delivered: signed, it is accepted and moves the delivery; forged, it
is refused; replayed, it is refused or counted as a duplicate (as the provider's row says);
signed for another account of the same kind, it is taken but ignored, for that account did
not send the message. Runs on both databases.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.helpers import eventually, post, put_type, running_dispatcher
from tests.integration.contract import cases
from tests.integration.contract.adapters import OTHER, PROVIDERS, Contract
from tests.integration.contract.cases import Callback, Inbound, Sent
from tidings.service import Service
from tidings.simulator.server import Simulator

NAMES = sorted(PROVIDERS)
UNCONFIGURED = "unconfigured"
TO_FIELD = {"email": "email", "whatsapp": "whatsapp"}  # else the SMS number


def inbound(contract: Contract) -> Inbound:
    found: Inbound = cases.case(contract.capabilities, contract.name, "inbound")
    return found


@pytest.fixture
async def sent(
    provider: str, sim: Simulator, service: Service, client: httpx.AsyncClient
) -> AsyncIterator[Sent]:
    """One message sent through the provider's adapter, its accounts in the settings."""
    contract = PROVIDERS[provider]
    side = inbound(contract)
    sending = contract.inbound_adapter(sim, service.settings.public_url)
    accounts = {name: contract.receiving(sim, name) for name in (sending.name, OTHER)}
    accounts[UNCONFIGURED] = contract.account(sim, **side.unconfigured)
    service.settings = service.settings.model_copy(update={"accounts": accounts})
    await put_type(client, channels=(side.channel,))
    to = {TO_FIELD.get(side.channel, "phone"): side.recipient}
    body = {"type": "order.confirmed", "to": to, "channels": [side.channel]}
    response = await post(client, body)
    assert response.status_code == 202, response.text
    notification_id = response.json()["id"]
    try:
        async with running_dispatcher(service, sending):
            await eventually(lambda: status(client, notification_id, "SENT"))
    finally:
        await sending.close()
    item = await delivery(client, notification_id)
    [received] = sim.state(contract.state).received
    yield Sent(
        sending.name,
        notification_id,
        item["id"],
        item["providerMessageId"],
        side.recipient,
        received.payload,
    )


async def delivery(client: httpx.AsyncClient, notification_id: str) -> dict[str, Any]:
    response = await client.get(f"/v1/notifications/{notification_id}")
    [item] = response.json()["deliveries"]
    found: dict[str, Any] = item
    return found


async def status(client: httpx.AsyncClient, notification_id: str, expected: str) -> bool:
    found: str = (await delivery(client, notification_id))["status"]
    return found == expected


async def kinds(client: httpx.AsyncClient, notification_id: str) -> list[str]:
    return [entry["kind"] for entry in (await delivery(client, notification_id))["history"]]


async def send(client: httpx.AsyncClient, callback: Callback) -> httpx.Response:
    return await client.post(callback.path, content=callback.body, headers=callback.headers)


def delivered(
    contract: Contract, sim: Simulator, sent: Sent, account: str, forged: bool = False
) -> Callback:
    return contract.callback(sim, sent, contract.delivered(sent), account, forged)


@pytest.mark.parametrize("provider", NAMES)
async def test_a_signed_callback_is_accepted(
    provider: str, sim: Simulator, client: httpx.AsyncClient, sent: Sent
) -> None:
    contract = PROVIDERS[provider]
    response = await send(client, delivered(contract, sim, sent, sent.account))
    assert response.status_code == 200, response.text
    assert (response.json()["applied"], response.json()["ignored"]) == (1, 0)
    assert await status(client, sent.notification_id, "DELIVERED")
    assert (await kinds(client, sent.notification_id)).count("delivered") == 1


@pytest.mark.parametrize("provider", NAMES)
async def test_a_forged_callback_is_refused(
    provider: str, sim: Simulator, client: httpx.AsyncClient, sent: Sent
) -> None:
    contract = PROVIDERS[provider]
    response = await send(client, delivered(contract, sim, sent, sent.account, forged=True))
    assert response.status_code == 401, response.text
    assert await status(client, sent.notification_id, "SENT")
    assert "delivered" not in await kinds(client, sent.notification_id)


@pytest.mark.parametrize("provider", NAMES)
async def test_a_replayed_callback_is_refused_or_deduplicated(
    provider: str, sim: Simulator, client: httpx.AsyncClient, sent: Sent
) -> None:
    contract = PROVIDERS[provider]
    side = inbound(contract)
    callback = delivered(contract, sim, sent, sent.account)
    assert (await send(client, callback)).json()["applied"] == 1
    again = await send(client, callback)
    if side.replay == "refused":
        assert again.status_code == side.replay_status, again.text
        assert again.json()["error"]["code"] == side.replay_code
    else:
        assert again.status_code == 200, again.text
        assert (again.json()["applied"], again.json()["duplicates"]) == (0, 1)
    assert await status(client, sent.notification_id, "DELIVERED")
    assert (await kinds(client, sent.notification_id)).count("delivered") == 1


@pytest.mark.parametrize("provider", NAMES)
async def test_a_callback_for_another_accounts_message_is_ignored(
    provider: str, sim: Simulator, client: httpx.AsyncClient, sent: Sent
) -> None:
    """Signed by another account of the kind (its own secret): taken, but that account did
    not send the message, so nothing moves."""
    contract = PROVIDERS[provider]
    response = await send(client, delivered(contract, sim, sent, OTHER))
    assert response.status_code == 200, response.text
    assert (response.json()["applied"], response.json()["ignored"]) == (0, 1)
    assert await status(client, sent.notification_id, "SENT")
    assert "delivered" not in await kinds(client, sent.notification_id)


@pytest.mark.parametrize("provider", NAMES)
async def test_an_unknown_or_unconfigured_account_is_refused(
    provider: str, sim: Simulator, client: httpx.AsyncClient, sent: Sent
) -> None:
    """A genuine callback sent to an account the settings do not have (404), or to one
    without the secret to verify it (403): never taken unauthenticated."""
    contract = PROVIDERS[provider]
    genuine = delivered(contract, sim, sent, sent.account)
    for account, expected in (("nobody", 404), (UNCONFIGURED, 403)):
        path = genuine.path.replace(f"/{sent.account}", f"/{account}", 1)
        response = await send(client, Callback(path, genuine.body, genuine.headers))
        assert response.status_code == expected, (account, response.text)
    assert response.json()["error"]["code"] == "webhook_not_configured"
    assert await status(client, sent.notification_id, "SENT")
