"""The chat channels' addresses: what the profile and ``to`` accept, in the form stored, and
a 422 naming the field for anything else (a retired Teams connector included)."""

from __future__ import annotations

import httpx
import pytest

from tests.helpers import post
from tidings.providers import chat_addresses

DISCORD_TOKEN = "a" * 68


@pytest.mark.parametrize(
    ("parse", "given", "stored"),
    [
        (chat_addresses.slack_address, "C0123ABCDE", "C0123ABCDE"),
        (chat_addresses.slack_address, "U0ANA0001", "U0ANA0001"),
        (
            chat_addresses.slack_address,
            "https://hooks.slack.com/services/T0001/B0001/abcDEF123",
            "https://hooks.slack.com/services/T0001/B0001/abcDEF123",
        ),
        (
            chat_addresses.discord_address,
            f"https://discordapp.com/api/v10/webhooks/123456789012345678/{DISCORD_TOKEN}?wait=true",
            f"https://discord.com/api/webhooks/123456789012345678/{DISCORD_TOKEN}",
        ),
        (
            chat_addresses.teams_address,
            "https://prod-01.westus.logic.azure.com:443/workflows/abc/triggers/manual/paths/invoke?sig=x",
            "https://prod-01.westus.logic.azure.com:443/workflows/abc/triggers/manual/paths/invoke?sig=x",
        ),
        (chat_addresses.telegram_address, "-1001234567890", "-1001234567890"),
        (chat_addresses.telegram_address, "@tidings_news", "@tidings_news"),
    ],
)
def test_each_address_is_stored_in_its_one_form(parse: object, given: str, stored: str) -> None:
    assert callable(parse)
    assert parse(given) == stored


@pytest.mark.parametrize(
    ("parse", "given"),
    [
        (chat_addresses.slack_address, "#general"),
        (chat_addresses.slack_address, "https://hooks.slack.com.evil.example/services/T1/B1/x"),
        (chat_addresses.discord_address, "https://discord.evil.example/api/webhooks/1/x"),
        (chat_addresses.teams_address, "https://attacker.example/workflows/x"),
        (chat_addresses.teams_address, "http://prod-01.westus.logic.azure.com/workflows/x"),
        (chat_addresses.telegram_address, "0"),
        (chat_addresses.telegram_address, "ana"),
    ],
)
def test_an_address_elsewhere_is_refused(parse: object, given: str) -> None:
    assert callable(parse)
    with pytest.raises(ValueError):
        parse(given)


def test_an_office_365_connector_is_refused_as_retired() -> None:
    with pytest.raises(ValueError, match="retired"):
        chat_addresses.teams_address(
            "https://contoso.webhook.office.com/webhookb2/abc/IncomingWebhook/def"
        )


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
async def test_the_api_names_the_field_of_a_bad_chat_address(client: httpx.AsyncClient) -> None:
    bad_teams = {"teams": "https://contoso.webhook.office.com/webhookb2/abc"}
    answer = await client.put("/v1/users/ana", json=bad_teams)
    assert answer.status_code == 422
    error = answer.json()["error"]
    assert error["field"] == "teams" and "retired" in error["message"]
    kind = {"category": "transactional", "priority": "normal", "channels": ["slack"]}
    assert (await client.put("/v1/types/note", json=kind)).status_code in (200, 201)
    answer = await post(client, {"type": "note", "to": {"slack": "#general"}})
    assert answer.status_code == 422
    assert answer.json()["error"]["field"] == "to.slack"
    nobody = {"type": "note", "userId": "nobody-has-slack", "channels": ["slack"]}
    answer = await post(client, nobody)
    assert answer.status_code == 422
    assert answer.json()["error"]["field"] in ("to.slack", "userId")


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
async def test_a_whatsapp_template_names_an_approved_one_or_has_text(
    client: httpx.AsyncClient,
) -> None:
    kind = {"category": "transactional", "priority": "normal", "channels": ["whatsapp"]}
    assert (await client.put("/v1/types/wa", json=kind)).status_code in (200, 201)
    url = "/v1/templates/wa/whatsapp/en"
    nothing = await client.put(url, json={"data": {"1": "{{ data.order }}"}})
    assert nothing.status_code == 422
    assert nothing.json()["error"]["code"] == "missing_part"
    no_language = await client.put(url, json={"data": {"template": "order_update"}})
    assert no_language.status_code == 422
    stray = {"data": {"template": "order_update", "language": "en_US", "name": "x"}}
    assert (await client.put(url, json=stray)).status_code == 422
    good = {"data": {"template": "order_update", "language": "en_US", "1": "{{ data.order }}"}}
    assert (await client.put(url, json=good)).status_code in (200, 201)
    answer = await post(client, {"type": "wa", "to": {"whatsapp": "5511912345678"}})
    assert (answer.status_code, answer.json()["error"]["field"]) == (422, "to.whatsapp")
    answer = await client.put("/v1/users/ana", json={"whatsapp": "+5511912345678"})
    assert answer.json()["whatsapp"] == "+5511912345678"
