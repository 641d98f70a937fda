"""Opens and clicks measured by tidings (docs/tracking.md): signed links that redirect only
to the URL that was in the message, an open pixel, and both in the delivery's history."""

from __future__ import annotations

import json
import re
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers import eventually, post, running_dispatcher
from tidings.providers.sink import SinkProvider
from tidings.service import Service
from tidings.tracking.engagement_links import EngagementLinks, ExpiredToken, InvalidToken
from tidings.tracking.html_links import tracked_links, with_open_pixel
from tidings.tracking.user_agents import MACHINE, agent_class

LINKS = EngagementLinks("secret", "https://tidings.example", 365)
DELIVERY = uuid.UUID("0190a6f0-0000-7000-8000-000000000001")
OTHER_DELIVERY = uuid.UUID("0190a6f0-0000-7000-8000-000000000002")
urls = st.builds(
    lambda host, path: f"https://{host}.example/{path}",
    st.from_regex(r"[a-z0-9-]{1,20}", fullmatch=True),
    st.text(min_size=0, max_size=200),
)


@settings(max_examples=300, deadline=None)
@given(url=urls, position=st.integers(min_value=0), replacement=st.characters(codec="ascii"))
def test_a_click_token_redirects_only_to_its_own_url(
    url: str, position: int, replacement: str
) -> None:
    token = LINKS.click_url(DELIVERY, url).rsplit("/", 1)[1]
    found = LINKS.read_click(token)
    assert (found.delivery_id, found.url) == (DELIVERY, url)
    at = position % len(token)
    altered = token[:at] + replacement + token[at + 1 :]
    try:
        again = LINKS.read_click(altered)
    except InvalidToken:
        return
    # An alteration the signature does not see can only give back the same link.
    assert (again.delivery_id, again.url) == (DELIVERY, url)


@settings(max_examples=100, deadline=None)
@given(url=urls, other=urls)
def test_no_token_made_for_one_url_or_secret_opens_another(url: str, other: str) -> None:
    token = LINKS.click_url(DELIVERY, url).rsplit("/", 1)[1]
    stranger = EngagementLinks("another secret", "https://tidings.example", 365)
    with pytest.raises(InvalidToken):
        stranger.read_click(token)
    with pytest.raises(InvalidToken):  # an open token is not a click token, nor the reverse
        LINKS.read_click(LINKS.open_url(DELIVERY).rsplit("/", 1)[1])
    with pytest.raises(InvalidToken):
        LINKS.read_open(token)
    # Another link's payload (another delivery, another URL) under this token's timestamp
    # and signature, and this payload under that token's: neither reads.
    theirs = LINKS.click_url(OTHER_DELIVERY, other).rsplit("/", 1)[1]
    payload, stamp, signature = token.rsplit(".", 2)  # a compressed payload starts with "."
    their_payload, their_stamp, their_signature = theirs.rsplit(".", 2)
    spliced = (f"{their_payload}.{stamp}.{signature}", f"{payload}.{their_stamp}.{their_signature}")
    for spliced_token in spliced:
        with pytest.raises(InvalidToken):
            LINKS.read_click(spliced_token)


def test_an_old_token_has_expired(monkeypatch: pytest.MonkeyPatch) -> None:
    now = time.time()
    monkeypatch.setattr(time, "time", lambda: now - 366 * 86400)
    old = LINKS.click_url(DELIVERY, "https://shop.example/").rsplit("/", 1)[1]
    monkeypatch.setattr(time, "time", lambda: now)
    with pytest.raises(ExpiredToken):
        LINKS.read_click(old)


def test_links_are_rewritten_except_those_left_alone() -> None:
    html = (
        '<p><a href="https://shop.example/a?x=1&amp;y=2">A</a>'
        "<a class='b' href='http://shop.example/b'>B</a>"
        "<a href=https://shop.example/c>C</a>"
        '<a title="x>y" href="https://shop.example/d">D</a>'
        '<a href="mailto:help@shop.example">mail</a><a href="tel:+15550100">call</a>'
        '<a href="https://shop.example/e" data-tidings-notrack>E</a>'
        '<a href="https://tidings.example/u/TOKEN">unsubscribe</a>'
        '<a href="https://tidings.example/p/TOKEN">preferences</a>'
        '<a href="/relative">R</a><a name="top">no href</a></p>'
    )
    out = tracked_links(html, lambda url: f"CLICK[{url}]", LINKS.is_ours)
    hrefs = re.findall(r'href="([^"]*)"', out)
    assert hrefs == [
        "CLICK[https://shop.example/a?x=1&amp;y=2]",  # the URL unescaped, then escaped again
        "CLICK[http://shop.example/b]",
        "CLICK[https://shop.example/c]",
        "CLICK[https://shop.example/d]",
        "mailto:help@shop.example",
        "tel:+15550100",
        "https://shop.example/e",
        "https://tidings.example/u/TOKEN",
        "https://tidings.example/p/TOKEN",
        "/relative",
    ]
    assert "CLICK[https://shop.example/a?x=1&y=2]" in out.replace("&amp;", "&")


def test_the_pixel_goes_before_the_end_of_the_body() -> None:
    assert with_open_pixel("<html><body><p>Hi</p></body></html>", "https://t/o/x").endswith(
        'style="display:block;border:0;width:1px;height:1px"></body></html>'
    )
    assert with_open_pixel("<p>Hi</p>", "https://t/o/x").startswith("<p>Hi</p><img ")


def test_machine_fetches_are_told_apart() -> None:
    assert agent_class("Mozilla/5.0") in MACHINE  # Apple Mail Privacy Protection
    assert agent_class(None) in MACHINE
    assert agent_class("Mozilla/5.0 (compatible; Barracuda Sentinel)") in MACHINE
    gmail = (
        "Mozilla/5.0 (Windows NT 5.1; rv:11.0) Gecko Firefox/11.0 (via ggpht.com GoogleImageProxy)"
    )
    assert agent_class(gmail) not in MACHINE
    thunderbird = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Thunderbird/128.0"
    assert agent_class(thunderbird) not in MACHINE


HTML = (
    '<html><body><p>Hello!</p><a href="https://shop.example/sale?id={{ data.id }}">Sale</a>'
    '<a href="{{ unsubscribe_url }}">Unsubscribe</a></body></html>'
)


async def sent_html(
    client: httpx.AsyncClient, service: Service, type_name: str
) -> tuple[str, dict[str, Any]]:
    accepted = await post(
        client,
        {"type": type_name, "to": {"email": "ana@example.com"}, "data": {"id": 7}},
    )
    assert accepted.status_code == 202, accepted.text
    body = accepted.json()
    outbox = Path(service.settings.outbox_dir) / "email" / f"{body['deliveries'][0]['id']}.json"
    async with running_dispatcher(service, SinkProvider(service.settings.outbox_dir)):
        await eventually(outbox.exists)
    message = json.loads(outbox.read_text())
    return message["content"]["html"], body


async def put_type_with_html(
    client: httpx.AsyncClient, name: str, category: str, **extra: Any
) -> None:
    kind = {"category": category, "priority": "normal", "channels": ["email"], **extra}
    assert (await client.put(f"/v1/types/{name}", json=kind)).status_code == 201
    template = {"subject": "Hi", "text": "Hello", "html": HTML}
    assert (await client.put(f"/v1/templates/{name}/email/en", json=template)).status_code == 201


async def test_opens_and_clicks_end_in_the_deliverys_history(
    client: httpx.AsyncClient, service: Service
) -> None:
    await put_type_with_html(client, "weekly.sale", "marketing")
    html, accepted = await sent_html(client, service, "weekly.sale")
    base = re.escape(service.settings.public_url)
    clicks = re.findall(f'href="{base}/t/c/([^"]+)"', html)
    pixels = re.findall(r'src="[^"]*/t/o/([^"]+)"', html)
    assert len(clicks) == 1 and len(pixels) == 1, html
    assert "/u/" in html  # the unsubscribe link is left as it is

    gif = await client.get(f"/t/o/{pixels[0]}", headers={"User-Agent": "Thunderbird/128.0"})
    assert gif.status_code == 200 and gif.headers["content-type"] == "image/gif"
    assert "no-store" in gif.headers["cache-control"]
    machine = await client.get(f"/t/o/{pixels[0]}", headers={"User-Agent": "Mozilla/5.0"})
    assert machine.status_code == 200
    followed = await client.get(f"/t/c/{clicks[0]}", headers={"User-Agent": "Thunderbird/128.0"})
    assert followed.status_code == 302
    assert followed.headers["location"] == "https://shop.example/sale?id=7"
    # Whatever the client sends as its User-Agent, the recipient gets the page.
    long_agent = {"User-Agent": "Mozilla/5.0 " + "x" * 20_000}
    assert (await client.get(f"/t/c/{clicks[0]}", headers=long_agent)).status_code == 302

    forged = clicks[0][:-3] + ("AAA" if not clicks[0].endswith("AAA") else "BBB")
    refused = await client.get(f"/t/c/{forged}")
    assert refused.status_code == 404 and "location" not in refused.headers
    assert (await client.get("/t/o/not-a-token")).status_code == 404

    shown = (await client.get(f"/v1/notifications/{accepted['id']}")).json()
    delivery = shown["deliveries"][0]
    assert delivery["engagement"]["opens"] == 2
    assert delivery["engagement"]["humanOpens"] == 1
    assert delivery["engagement"]["clicks"] == 2
    kinds = [h["kind"] for h in delivery["history"]]
    assert kinds.count("opened") == 2 and kinds.count("clicked") == 2
    clicked = next(h for h in delivery["history"] if h["kind"] == "clicked")
    assert clicked["detail"]["url"] == "https://shop.example/sale?id=7"


async def test_transactional_mail_is_not_tracked_unless_asked(
    client: httpx.AsyncClient, service: Service
) -> None:
    await put_type_with_html(client, "receipt", "transactional")
    html, _ = await sent_html(client, service, "receipt")
    assert "/t/o/" not in html and "/t/c/" not in html
    await put_type_with_html(client, "receipt.tracked", "transactional", tracking={"clicks": True})
    shown = (await client.get("/v1/types/receipt.tracked")).json()
    assert shown["tracking"] == {"opens": False, "clicks": True}
    html, _ = await sent_html(client, service, "receipt.tracked")
    assert "/t/o/" not in html and "/t/c/" in html
