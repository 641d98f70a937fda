"""The inbox's web component in a real browser (Debian's chromium, driven by Playwright), on a
page of another origin: a message sent shows within a second, its HTML shown as text;
marking it read drops the badge. UPDATE_SCREENSHOT=1 saves docs/inbox.png."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import uvicorn
from playwright.async_api import expect
from starlette.applications import Starlette
from starlette.responses import HTMLResponse
from starlette.routing import Route

from tests.helpers import eventually, post, running_dispatcher
from tests.integration.test_inbox_channel import inbox_type, register
from tests.processes import free_port
from tests.system.test_dashboard import chromium_or_skip
from tidings.api.app import create_app
from tidings.providers.testing import ScriptedProvider
from tidings.service import Service
from tidings.settings import Settings

SHOWN_AT = """() => {
  window.shownAt = null;
  document.querySelector("tidings-inbox")
    .addEventListener("tidings:message", () => { window.shownAt = Date.now(); }, {once: true});
}"""
SCREENSHOT = Path(__file__).parents[2] / "docs" / "inbox.png"
PAGE = """<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Shop</title>
<script src="{api}/inbox.js"></script>
<style>body {{ font-family: sans-serif; margin: 0; }}
nav {{ display: flex; justify-content: space-between; align-items: center; padding: 8px 24px;
       background: #24292f; color: #fff; }}
tidings-inbox {{ --tidings-fg: #1f2328; --tidings-accent: #8250df; }}
nav tidings-inbox::part(bell) {{ color: #fff; }}</style></head>
<body><nav><strong>Shop</strong>
<tidings-inbox base-url="{api}" user="ana" token="{token}"></tidings-inbox></nav>
<main style="padding: 24px">Another origin's page.</main></body></html>"""


@contextlib.asynccontextmanager
async def serving(app: object, port: int) -> AsyncIterator[None]:
    import asyncio

    config = uvicorn.Config(app, port=port, log_level="warning", lifespan="off")  # type: ignore[arg-type]
    config.timeout_graceful_shutdown = 1
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    try:
        await eventually(lambda: server.started)
        yield
    finally:
        server.should_exit = True
        await task


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
async def test_the_component_shows_a_new_message_within_a_second_and_marks_it_read(
    service: Service, settings: Settings, tmp_path: Path
) -> None:
    executable = chromium_or_skip()
    from playwright.async_api import async_playwright

    api_port, page_port = free_port(), free_port()
    api, origin = f"http://127.0.0.1:{api_port}", f"http://localhost:{page_port}"
    settings.inbox.allowed_origins = [origin]
    async with (
        serving(create_app(service), api_port),
        httpx.AsyncClient(base_url=api, timeout=10) as client,
    ):
        await inbox_type(client)
        await register(client, "ana")
        token = (await client.post("/v1/users/ana/inbox-token")).json()["token"]
        page_html = PAGE.format(api=api, token=token)
        shop = Starlette(routes=[Route("/", lambda _r: HTMLResponse(page_html))])
        async with (
            serving(shop, page_port),
            running_dispatcher(service, ScriptedProvider()),
            async_playwright() as playwright,
        ):
            chromium = await playwright.chromium.launch(executable_path=executable)
            try:
                page = await chromium.new_page(viewport={"width": 900, "height": 560})
                await page.goto(origin)
                inbox = page.locator("tidings-inbox")
                badge = inbox.locator(".badge")
                await expect(inbox.locator(".bell")).to_have_attribute(
                    "aria-label", "Notifications, 0 unread"
                )
                await expect(badge).to_be_hidden()
                await page.wait_for_timeout(300)  # the stream is open
                # A first message warms the dispatcher up (its first claim waits for the
                # fleet's count); the one measured is sent to a running service.
                first = {"type": "order.shipped", "userId": "ana", "channels": ["inbox"]}
                await post(client, {**first, "data": {"order": "A-16", "name": "Ana"}})
                await expect(badge).to_have_text("1", timeout=10_000)
                await client.post("/v1/users/ana/inbox/read-all")
                await expect(badge).to_be_hidden()
                # Timed by the page's clock: from just before the send to the component's
                # event, fired once the new message is rendered (no polling in between).
                await page.evaluate(SHOWN_AT)
                sent = await page.evaluate("Date.now()")
                body = {"type": "order.shipped", "userId": "ana", "channels": ["inbox"]}
                data = {"order": "A-17", "name": "<img src=x onerror=alert(1)>"}
                assert (await post(client, {**body, "data": data})).status_code == 202
                await page.wait_for_function("window.shownAt !== null", timeout=5000)
                took = (await page.evaluate("window.shownAt") - sent) / 1000
                assert took < 1.0, took
                await expect(badge).to_have_text("1")
                await inbox.locator(".bell").press("Enter")  # keyboard opens the list
                row = inbox.locator("li.unread")
                await expect(row).to_have_count(1)
                await expect(row.locator(".title")).to_have_text("Order A-17 shipped")
                # The message's HTML is shown as text, never made into elements.
                await expect(row.locator(".body")).to_contain_text("<b><img src=x")
                assert await inbox.locator("li img, li b").count() == 0
                link = row.locator("a")
                await expect(link).to_have_attribute("href", "https://shop.example/orders/A-17")
                await page.screenshot(path=str(tmp_path / "inbox.png"))
                await row.get_by_role("button", name="Mark read").click()
                await expect(badge).to_be_hidden()
                await expect(inbox.locator("li.read")).to_have_count(2)
                await inbox.get_by_role("button", name="Mark all read").press("Escape")
                await expect(inbox.locator(".panel")).to_be_hidden()
            finally:
                await chromium.close()
        feed = (await client.get("/v1/users/ana/inbox")).json()
        assert feed["counts"]["unread"] == 0 and feed["items"][0]["readAt"] is not None
    if os.environ.get("UPDATE_SCREENSHOT"):
        shutil.copy(tmp_path / "inbox.png", SCREENSHOT)
