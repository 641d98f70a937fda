"""The whole loop of each chat channel: a producer registers users with their chat
addresses, sends through the API, a dispatcher sends through the simulated service, and each
delivery ends as that service's answer says: sent, a retry after its rate limit, failed
permanently, poison, a configuration error waiting its 300 s, a dead address suppressed (so
the next notification to it is skipped at accept)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from tests.helpers import eventually, post
from tidings.assembly import assemble_dispatcher
from tidings.clock import utcnow
from tidings.providers.accounts import AccountSettings
from tidings.providers.discord import DiscordAccount
from tidings.providers.slack import SlackAccount
from tidings.providers.teams import TeamsAccount
from tidings.providers.telegram import TelegramAccount
from tidings.service import Service, providers_from_settings
from tidings.simulator.server import Simulator, SimulatorConfig
from tidings.store.schema import delivery, suppression

IN_PROGRESS = ("PENDING", "QUEUED", "SENDING")


@pytest.fixture
async def sim(tmp_path: Path) -> AsyncIterator[Simulator]:
    async with Simulator(SimulatorConfig(credentials_dir=tmp_path / "credentials")) as simulated:
        yield simulated


@contextlib.asynccontextmanager
async def dispatching(
    service: Service, channel: str, account: AccountSettings
) -> AsyncIterator[None]:
    """A dispatcher sending ``channel`` through ``account`` (named ``<channel>-sim``)."""
    name = f"{channel}-sim"
    service.settings = service.settings.model_copy(
        update={"accounts": {name: account}, "providers": {channel: [name]}}
    )
    providers = providers_from_settings(service.settings)
    stop = asyncio.Event()
    task = asyncio.create_task(assemble_dispatcher(service, providers).run(stop))
    try:
        yield
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=30)
        await providers.close()


async def register(
    client: httpx.AsyncClient, channel: str, template: dict[str, Any], users: Mapping[str, str]
) -> None:
    """A type ``<channel>.note`` with ``template``, and each user with their address."""
    kind = {"category": "transactional", "priority": "high", "channels": [channel]}
    answer = await client.put(f"/v1/types/{channel}.note", json=kind)
    assert answer.status_code in (200, 201), answer.text
    answer = await client.put(f"/v1/templates/{channel}.note/{channel}/en", json=template)
    assert answer.status_code in (200, 201), answer.text
    for user, address in users.items():
        answer = await client.put(f"/v1/users/{user}", json={channel: address})
        assert answer.status_code in (200, 201), answer.text
        assert answer.json()[channel] == address


async def notify(client: httpx.AsyncClient, channel: str, user: str) -> str:
    body = {"type": f"{channel}.note", "userId": user, "data": {"order": "<42> & co"}}
    answer = await post(client, body)
    assert answer.status_code == 202, answer.text
    return str(answer.json()["id"])


async def rows(service: Service) -> dict[str, tuple[str, str | None, Any]]:
    """Address -> (status, failure kind, next attempt) of every delivery."""
    query = sa.select(
        delivery.c.address, delivery.c.status, delivery.c.failure_kind, delivery.c.next_attempt_at
    )
    async with service.db.engine.connect() as conn:
        found = (await conn.execute(query)).all()
    return {r.address: (r.status, r.failure_kind, r.next_attempt_at) for r in found}


async def suppressed(service: Service) -> dict[tuple[str, str], str]:
    query = sa.select(suppression.c.channel, suppression.c.address, suppression.c.reason)
    async with service.db.engine.connect() as conn:
        return {(r.channel, r.address): r.reason for r in await conn.execute(query)}


async def settled(
    service: Service, expected: Mapping[str, tuple[str, str | None]]
) -> dict[str, tuple[str, str | None, Any]] | None:
    """The rows once each address has the (status, kind) expected of it."""
    found = await rows(service)
    if all(found.get(a, ("",))[:2] == want for a, want in expected.items()):
        return found
    return None


def waits_for_the_operator(found: tuple[str, str | None, Any]) -> bool:
    """PENDING again, not due for about five minutes (a configuration error's wait)."""
    status, _, due = found
    due = due if due.tzinfo else due.replace(tzinfo=utcnow().tzinfo)
    return status == "PENDING" and due > utcnow() + timedelta(seconds=250)


# --- Slack ----------------------------------------------------------------------------------

SLACK = {
    "ana": "U0ANA0001",  # sent: the bot's direct message with Ana
    "ben": "C0LIMITED",  # rate limited once, then sent
    "cid": "C0GONE001",  # channel_not_found: failed, not suppressed (the bot may be invited)
    "dan": "C0TOOLONG",  # msg_too_long: poison
    "eve": "C0NOAUTH1",  # invalid_auth: our token, retried in 300 s
    "fay": "https://hooks.slack.com/services/T0SIM0001/B0SIM0001/webhookOfFay",
    "gus": "https://hooks.slack.com/services/T0SIM0001/B0SIM0002/webhookOfGus",  # removed
}


async def test_slack_sends_and_classifies_each_answer_of_the_web_api_and_webhooks(
    service: Service, client: httpx.AsyncClient, sim: Simulator
) -> None:
    template = {"subject": "Order {{ data.order }}", "text": "Your order {{ data.order }} shipped."}
    await register(client, "slack", template, SLACK)
    slack = sim.state("slack")
    slack.script(SLACK["ben"], "ratelimited")
    slack.script(SLACK["cid"], "channel_not_found")
    slack.script(SLACK["dan"], "msg_too_long")
    slack.script(SLACK["eve"], "invalid_auth")
    slack.script(SLACK["gus"], "no_service")
    account = SlackAccount(
        bot_token=sim.config.slack_bot_token,
        base_url=f"{sim.url}/api",
        webhooks_base_url=sim.url,
        timeout=5,
    )
    expected = {
        SLACK["ana"]: ("SENT", None),
        SLACK["ben"]: ("SENT", None),
        SLACK["cid"]: ("FAILED", "permanent"),
        SLACK["dan"]: ("FAILED", "poison"),
        SLACK["fay"]: ("SENT", None),
        SLACK["gus"]: ("FAILED", "permanent"),
    }
    async with dispatching(service, "slack", account):
        for user in SLACK:
            await notify(client, "slack", user)
        found = await eventually(lambda: settled(service, expected), within=20)
        assert waits_for_the_operator(found[SLACK["eve"]])
        # The removed webhook's URL is suppressed: the next notification skips it.
        assert await suppressed(service) == {("slack", SLACK["gus"]): "no_service"}
        skipped = await notify(client, "slack", "gus")
        answer = await client.get(f"/v1/notifications/{skipped}")
        [again] = answer.json()["deliveries"]
        assert (again["status"], again["skipReason"]) == ("SKIPPED", "suppressed")

    by_address = {r.address: r.payload for r in slack.received}
    assert set(by_address) == {SLACK["ana"], SLACK["ben"], SLACK["fay"]}
    sent = by_address[SLACK["ana"]]
    # The data is escaped as Slack asks: it cannot ping a channel or forge a link.
    assert sent["text"] == "Order &lt;42&gt; &amp; co\nYour order &lt;42&gt; &amp; co shipped."
    heading = {"type": "plain_text", "text": "Order <42> & co", "emoji": True}
    section = {"type": "mrkdwn", "text": "Your order &lt;42&gt; &amp; co shipped."}
    blocks = [{"type": "header", "text": heading}, {"type": "section", "text": section}]
    assert sent["blocks"] == blocks
    assert sent["metadata"]["event_type"] == "tidings_delivery"
    assert by_address[SLACK["fay"]]["blocks"] == sent["blocks"]
    assert "metadata" not in by_address[SLACK["fay"]]
    assert slack.summary()["duplicates"] == 0


# --- Discord --------------------------------------------------------------------------------

HOOK = "https://discord.com/api/webhooks/{}/" + "tok3n_Of-a-Discord-webhook" * 3
DISCORD = {
    "ana": HOOK.format(100000000000000001),  # sent
    "ben": HOOK.format(100000000000000002),  # its webhook's limit once, then sent
    "cid": HOOK.format(100000000000000003),  # Unknown Webhook: failed, its URL suppressed
    "dan": HOOK.format(100000000000000004),  # Invalid Form Body: poison
}


async def test_discord_sends_embeds_and_classifies_each_answer(
    service: Service, client: httpx.AsyncClient, sim: Simulator
) -> None:
    template = {"subject": "Order {{ data.order }}", "text": "@everyone {{ data.order }} shipped"}
    await register(client, "discord", template, DISCORD)
    discord = sim.state("discord")
    discord.script(DISCORD["ben"], "rate_limited")
    discord.script(DISCORD["cid"], "10015")
    discord.script(DISCORD["dan"], "50035")
    expected = {
        DISCORD["ana"]: ("SENT", None),
        DISCORD["ben"]: ("SENT", None),
        DISCORD["cid"]: ("FAILED", "permanent"),
        DISCORD["dan"]: ("FAILED", "poison"),
    }
    async with dispatching(service, "discord", DiscordAccount(base_url=sim.url, timeout=5)):
        for user in DISCORD:
            await notify(client, "discord", user)
        await eventually(lambda: settled(service, expected), within=20)
        assert await suppressed(service) == {("discord", DISCORD["cid"]): "unknown_webhook"}

    by_address = {r.address: r.payload for r in discord.received}
    assert set(by_address) == {DISCORD["ana"], DISCORD["ben"]}
    sent = by_address[DISCORD["ana"]]
    assert sent["embeds"] == [
        {"title": "Order <42> & co", "description": "@everyone <42> & co shipped"}
    ]
    assert sent["allowed_mentions"] == {"parse": []}  # the text pings nobody
    assert discord.summary()["duplicates"] == 0


# --- Telegram -------------------------------------------------------------------------------

TELEGRAM = {
    "ana": "421337001",  # sent, the data escaped for HTML
    "ben": "421337002",  # "bot was blocked by the user": deactivated (suppressed)
    "cid": "-421337003",  # a group that became a supergroup: sent there, in the same send
    "dan": "421337004",  # chat not found: failed, not suppressed
    "eve": "421337005",  # 429 once, then sent
}


async def test_telegram_sends_follows_a_migrated_group_and_deactivates_a_blocked_user(
    service: Service, client: httpx.AsyncClient, sim: Simulator
) -> None:
    template = {"subject": "Order {{ data.order }}", "text": "Your order {{ data.order }} shipped."}
    await register(client, "telegram", template, TELEGRAM)
    telegram = sim.state("telegram")
    telegram.script(TELEGRAM["ben"], "blocked")
    telegram.script(TELEGRAM["cid"], "migrated")
    telegram.script(TELEGRAM["dan"], "chat_not_found")
    telegram.script(TELEGRAM["eve"], "rate_limited")
    account = TelegramAccount(bot_token=sim.config.telegram_bot_token, base_url=sim.url, timeout=5)
    expected = {
        TELEGRAM["ana"]: ("SENT", None),
        TELEGRAM["ben"]: ("FAILED", "permanent"),
        TELEGRAM["cid"]: ("SENT", None),
        TELEGRAM["dan"]: ("FAILED", "permanent"),
        TELEGRAM["eve"]: ("SENT", None),
    }
    async with dispatching(service, "telegram", account):
        ids = {user: await notify(client, "telegram", user) for user in TELEGRAM}
        await eventually(lambda: settled(service, expected), within=20)
        assert await suppressed(service) == {("telegram", TELEGRAM["ben"]): "bot_blocked"}
        skipped = await notify(client, "telegram", "ben")
        [again] = (await client.get(f"/v1/notifications/{skipped}")).json()["deliveries"]
        assert (again["status"], again["skipReason"]) == ("SKIPPED", "suppressed")
        [moved] = (await client.get(f"/v1/notifications/{ids['cid']}")).json()["deliveries"]

    by_chat = {r.address: r.payload for r in telegram.received}
    assert set(by_chat) == {TELEGRAM["ana"], "-100421337003", TELEGRAM["eve"]}
    assert moved["providerMessageId"] == "-100421337003:1"
    sent = by_chat[TELEGRAM["ana"]]
    assert sent["parse_mode"] == "HTML"
    escaped = "&lt;42&gt; &amp; co"
    assert sent["text"] == f"<b>Order {escaped}</b>\nYour order {escaped} shipped."
    assert telegram.summary()["duplicates"] == 0


# --- Teams ----------------------------------------------------------------------------------

LOGIC = "https://prod-42.westeurope.logic.azure.com:443/workflows/{}/triggers/manual/paths/invoke"
PLATFORM = (
    "https://default0f1e.ab.environment.api.powerplatform.com:443/powerautomate/automations"
    "/direct/workflows/{}/triggers/manual/paths/invoke"
)
SIGNED = "?api-version=2016-06-01&sp=%2Ftriggers%2Fmanual%2Frun&sv=1.0&sig=s1gnature"
TEAMS = {
    "ana": LOGIC.format("a0000001") + SIGNED,  # sent
    "ben": PLATFORM.format("b0000002") + SIGNED,  # throttled once, then sent
    "cid": LOGIC.format("c0000003") + SIGNED,  # the workflow deleted: suppressed
    "dan": LOGIC.format("d0000004") + SIGNED,  # the card refused: poison
}


async def test_teams_posts_adaptive_cards_to_workflows_and_classifies_each_answer(
    service: Service, client: httpx.AsyncClient, sim: Simulator
) -> None:
    template = {"subject": "Order {{ data.order }}", "text": "Your order {{ data.order }} shipped."}
    await register(client, "teams", template, TEAMS)
    teams = sim.state("teams")
    teams.script("b0000002", "rate_limited")
    teams.script("c0000003", "404")
    teams.script("d0000004", "400")
    expected = {
        TEAMS["ana"]: ("SENT", None),
        TEAMS["ben"]: ("SENT", None),
        TEAMS["cid"]: ("FAILED", "permanent"),
        TEAMS["dan"]: ("FAILED", "poison"),
    }
    async with dispatching(service, "teams", TeamsAccount(base_url=sim.url, timeout=5)):
        for user in TEAMS:
            await notify(client, "teams", user)
        await eventually(lambda: settled(service, expected), within=20)
        assert await suppressed(service) == {("teams", TEAMS["cid"]): "workflow_not_found"}

    by_workflow = {r.address: r.payload for r in teams.received}
    assert set(by_workflow) == {"a0000001", "b0000002"}
    [attachment] = by_workflow["a0000001"]["attachments"]
    assert attachment["contentType"] == "application/vnd.microsoft.card.adaptive"
    card = attachment["content"]
    assert (card["type"], card["version"]) == ("AdaptiveCard", "1.4")
    assert [block["text"] for block in card["body"]] == [
        "Order <42> & co",
        "Your order <42> & co shipped.",
    ]
    assert teams.summary()["duplicates"] == 0
