"""The whole path after "sent", end to end: a campaign of 1,000 marketing emails with an
HTML template through the simulated SendGrid (which reports deliveries, bounces and spam
reports back, signed); the open pixels, tracked links and unsubscribe links taken out of the
messages SendGrid received and used over HTTP, as recipients would; every event pushed to a
producer's endpoint (once after deduplicating by webhook-id, in order per notification, each
signature checked with the Standard Webhooks reference library), and the campaign report
equal, field by field, to what happened."""

from __future__ import annotations

import asyncio
import contextlib
import html
import json
import re
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import standardwebhooks

from tests.helpers import eventually, put_type
from tests.integration.test_campaigns import _status_is, add_users, post_campaign
from tests.integration.test_producer_webhooks import Receiver, receiving
from tests.integration.test_provider_loop import PUBLIC, serving, settled, simulator
from tidings.background.producer_webhooks import ProducerWebhooks
from tidings.background.report_folding import ReportFolder
from tidings.service import Service
from tidings.settings import Settings
from tidings.simulator.behaviour import Behaviour, Received
from tidings.simulator.server import Simulator

USERS = 1000
HUMAN = {"User-Agent": "Mozilla/5.0 (Macintosh) Thunderbird/128.0"}
MACHINE = {"User-Agent": "Mozilla/5.0"}
EVENTS = ["delivery.sent", "delivery.delivered", "delivery.bounced", "delivery.failed"]
EVENTS += ["delivery.skipped", "delivery.opened", "delivery.clicked", "delivery.complained"]
EVENTS += ["delivery.unsubscribed", "campaign.done"]
SUPPRESSED = "user-00000@example.com"  # skipped at accept
REFUSED = "user-00001@example.com"  # SendGrid answers 400: failed
NOTRACK = "https://shop.example/preferences"
HTML = (
    "<html><body><p>Hello {{ user.id }}!</p>"
    '<a href="https://shop.example/soldes/été?u={{ user.id }}">Sale</a> '
    '<a href="mailto:help@shop.example">Help</a> '
    f'<a href="{NOTRACK}" data-tidings-notrack>Preferences</a> '
    '<a href="{{ unsubscribe_url }}">Unsubscribe</a></body></html>'
)


@pytest.fixture
def settings(settings: Settings) -> Settings:
    hooks = settings.webhooks.model_copy(
        update={"allow_private": True, "retry_delays": [0.05, 0.2], "poll_interval": 0.05}
    )
    return settings.model_copy(update={"public_url": PUBLIC, "webhooks": hooks})


@contextlib.asynccontextmanager
async def after_sent(service: Service) -> AsyncIterator[None]:
    """What the dispatchers run beside sending: webhooks to producers, report folding."""
    stop = asyncio.Event()
    tasks = [
        asyncio.create_task(ProducerWebhooks(service.db, service.settings.webhooks).run(stop)),
        asyncio.create_task(ReportFolder(service.db, interval=0.1).run(stop)),
    ]
    try:
        yield
    finally:
        stop.set()
        await asyncio.wait_for(asyncio.gather(*tasks), 15)


@dataclass(frozen=True)
class Mail:
    """What one recipient got, as SendGrid received it."""

    delivery_id: str
    user: str
    pixel: str
    click: str
    unsubscribe: str


def mail_of(received: Received, service: Service) -> Mail:
    """The links of one message, checking that only the tracked one was rewritten."""
    payload = received.payload
    (part,) = [p["value"] for p in payload["content"] if p["type"] == "text/html"]
    hrefs = [html.unescape(h) for h in re.findall(r'<a href="([^"]*)"', part)]
    pixels = re.findall(r'<img src="([^"]*)"', part)
    assert len(hrefs) == 4 and len(pixels) == 1, part
    click, mail_to, untracked, unsubscribe = hrefs
    assert click.startswith(f"{PUBLIC}/t/c/") and pixels[0].startswith(f"{PUBLIC}/t/o/")
    assert mail_to == "mailto:help@shop.example" and untracked == NOTRACK
    assert payload["headers"]["List-Unsubscribe"] == f"<{unsubscribe}>"
    delivery_id = payload["personalizations"][0]["custom_args"]["delivery_id"]
    link = service.unsubscriber.read(unsubscribe.removeprefix(f"{PUBLIC}/u/"))
    assert link.delivery_id == uuid.UUID(delivery_id)  # the link names its delivery
    user = received.address.removesuffix("@example.com")
    return Mail(delivery_id, user, html.unescape(pixels[0]), click, unsubscribe)


@dataclass
class Done:
    """What the test did: in the report's words, and each delivery's events in order."""

    counts: Counter[str] = field(default_factory=Counter)
    events: dict[str, list[str]] = field(default_factory=dict)

    def add(self, mail: Mail, kind: str, *metrics: str) -> None:
        self.counts.update(metrics)
        self.events.setdefault(mail.delivery_id, []).append(f"delivery.{kind}")


async def act(mails: list[Mail]) -> Done:
    """Opens, clicks and unsubscribes as recipients make them, with the message's own URLs;
    a few recipients at once, each one's in order."""
    done = Done()
    slots = asyncio.Semaphore(8)
    async with httpx.AsyncClient(timeout=10) as web:

        async def recipient(n: int, mail: Mail) -> None:
            async with slots:
                await act_on(web, n, mail, done)

        await asyncio.gather(*(recipient(n, mail) for n, mail in enumerate(mails)))
    return done


async def act_on(web: httpx.AsyncClient, n: int, mail: Mail, done: Done) -> None:
    if n % 3 == 0:  # a human open, sometimes twice
        for again in range(1 + (n % 2)):
            assert (await web.get(mail.pixel, headers=HUMAN)).status_code == 200
            firsts = () if again else ("opened_unique", "opened_human_unique")
            done.add(mail, "opened", "opened", *firsts)
    elif n % 5 == 0:  # Apple's proxies fetching the pixel
        assert (await web.get(mail.pixel, headers=MACHINE)).status_code == 200
        done.add(mail, "opened", "opened", "opened_unique")
    if n % 4 == 0:
        answer = await web.get(mail.click, headers=HUMAN)
        assert answer.status_code == 302, answer.text
        # The link as the message's template wrote it, as a URI.
        wanted = f"https://shop.example/soldes/%C3%A9t%C3%A9?u={mail.user}"
        assert answer.headers["location"] == wanted
        done.add(mail, "clicked", "clicked", "clicked_unique")
    if n % 40 == 1:  # the first one used twice: one unsubscribe
        for _ in range(2 if n == 1 else 1):
            answer = await web.post(mail.unsubscribe, data={"List-Unsubscribe": "One-Click"})
            assert answer.status_code == 200, answer.text
        done.add(mail, "unsubscribed", "unsubscribed")


async def put_campaign_type(client: httpx.AsyncClient) -> None:
    tracking = {"opens": True, "clicks": True}
    await put_type(
        client,
        "weekly",
        category="marketing",
        channels=("email",),
        templates=False,
        tracking=tracking,
    )
    template = {"subject": "This week", "text": "Sale: https://shop.example/", "html": HTML}
    answer = await client.put("/v1/templates/weekly/email/en", json=template)
    assert answer.status_code == 201, answer.text


@pytest.mark.timeout(240)
async def test_a_campaign_reaches_the_producer_and_its_report(
    client: httpx.AsyncClient, service: Service, tmp_path: Path
) -> None:
    await put_campaign_type(client)
    await add_users(client, USERS)
    await client.put(f"/v1/suppressions/email/{SUPPRESSED}", json={"reason": "manual"})
    reports = {"bounce": 0.05, "spamreport": 0.02}
    behaviours = {"sendgrid": Behaviour(reports=reports, report_delay_ms=500)}
    async with (
        receiving(Receiver()) as receiver,
        simulator(tmp_path, behaviours) as sim,
        serving(service, sim),
        after_sent(service),
    ):
        made = await client.post(
            "/v1/webhook-endpoints", json={"url": receiver.url, "events": EVENTS}
        )
        secret = made.json()["secret"]
        sim.state("sendgrid").script(REFUSED, "400")
        answer = await post_campaign(client, {"type": "weekly", "audience": {"topic": "artist:77"}})
        campaign = answer.json()["campaignId"]
        await eventually(lambda: _status_is(client, campaign, "DONE"), within=120, interval=0.2)
        await eventually(lambda: settled(service, sim, USERS), within=60)
        decided = Counter(outcome for _, outcome in sim.state("sendgrid").reports)
        done = await act(recipients(sim, service))
        expected = expected_report(decided, done)
        events = event_count(expected, done)
        await eventually(lambda: len(receiver.unique()) >= events, within=90, interval=0.1)
        report = await eventually(lambda: folded(client, campaign, expected), within=30)

    assert report == expected
    check_received(receiver, secret, events, campaign, done)


def recipients(sim: Simulator, service: Service) -> list[Mail]:
    """The messages SendGrid accepted and did not bounce, in a fixed order."""
    bounced = {address for address, outcome in sim.state("sendgrid").reports if outcome == "bounce"}
    received = [r for r in sim.state("sendgrid").received if r.address not in bounced]
    mails = {mail.delivery_id: mail for mail in (mail_of(r, service) for r in received)}
    return [mails[key] for key in sorted(mails)]  # once each, should SendGrid get one twice


def expected_report(decided: Counter[str], done: Done) -> dict[str, Any]:
    sent = USERS - 2  # one suppressed, one refused

    def rate(count: int) -> float:
        return round(count / sent, 4)

    counts = {
        "sent": sent,
        "delivered": sent - decided["bounce"],
        "bounced": decided["bounce"],
        "complained": decided["spamreport"],
        "unsubscribed": done.counts["unsubscribed"],
        "failed": 1,
        "expired": 0,
        "cancelled": 0,
    }
    return counts | {
        "skipped": {"total": 1, "byReason": {"suppressed": 1}},
        "opened": {
            "total": done.counts["opened"],
            "unique": done.counts["opened_unique"],
            "uniqueHuman": done.counts["opened_human_unique"],
        },
        "clicked": {"total": done.counts["clicked"], "unique": done.counts["clicked_unique"]},
        "rates": {
            "delivered": rate(counts["delivered"]),
            "bounced": rate(counts["bounced"]),
            "complained": rate(counts["complained"]),
            "unsubscribed": rate(counts["unsubscribed"]),
            "opened": rate(done.counts["opened_human_unique"]),
            "clicked": rate(done.counts["clicked_unique"]),
        },
    }


def event_count(expected: dict[str, Any], done: Done) -> int:
    """Each email sent, then delivered or bounced (perhaps a complaint too); the skipped
    and the failed one; what the test did; the campaign's end."""
    provider: int = 2 * expected["sent"] + expected["complained"]
    return provider + 2 + sum(len(kinds) for kinds in done.events.values()) + 1


async def folded(
    client: httpx.AsyncClient, campaign: str, expected: dict[str, Any]
) -> dict[str, Any] | None:
    """The report once it counts every event the test expects (each counter only grows)."""
    report: dict[str, Any] = (await client.get(f"/v1/campaigns/{campaign}/report")).json()
    caught_up = all(
        report[name] == expected[name]
        for name in ("sent", "delivered", "bounced", "complained", "unsubscribed", "failed")
    )
    tracked = report["opened"] == expected["opened"] and report["clicked"] == expected["clicked"]
    return report if caught_up and tracked else None


def check_received(
    receiver: Receiver, secret: str, expected: int, campaign: str, done: Done
) -> None:
    verifier = standardwebhooks.Webhook(secret)
    order: dict[str, list[str]] = {}
    delivery_of: dict[str, str] = {}
    ends: list[dict[str, Any]] = []
    seen: set[str] = set()
    for headers, body in receiver.received:
        verifier.verify(body, headers)
        if headers["webhook-id"] in seen:
            continue
        seen.add(headers["webhook-id"])
        event = json.loads(body)
        if event["type"].startswith("campaign."):
            ends.append(event)
            continue
        order.setdefault(event["data"]["notificationId"], []).append(event["type"])
        delivery_of[event["data"]["notificationId"]] = event["data"]["deliveryId"]
    assert len(seen) == expected
    assert [(e["type"], e["data"]["campaignId"]) for e in ends] == [("campaign.done", campaign)]
    alone = Counter(tuple(kinds) for kinds in order.values() if len(kinds) == 1)
    assert alone == {("delivery.skipped",): 1, ("delivery.failed",): 1}
    for notification, kinds in order.items():
        if len(kinds) == 1:
            continue
        # Per notification, in the order things happened: sent, then what the provider
        # said, then what the test did after both, in the order it did it.
        did = done.events.get(delivery_of[notification], [])
        head, tail = kinds[: len(kinds) - len(did)], kinds[len(kinds) - len(did) :]
        assert tail == did, kinds
        assert head[0] == "delivery.sent", kinds
        provider = sorted(head[1:])
        assert provider in (["delivery.delivered"], ["delivery.bounced"], COMPLAINED), kinds


COMPLAINED = ["delivery.complained", "delivery.delivered"]
