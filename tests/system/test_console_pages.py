"""The dashboard's Messages pages and filtered dead letters (issue 29): the search of
notifications, a message's timeline with its replay, dead letters filtered and replayed in
bulk after a confirmation saying how many; in process and in a real browser (Debian's
chromium, Playwright), which saves docs/console-*.png with UPDATE_SCREENSHOT=1."""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

import httpx
import sqlalchemy as sa
from fastapi import FastAPI
from playwright.async_api import Page, async_playwright, expect

from tests.helpers import post, put_type
from tests.processes import free_port, tidings_env, tidings_processes, wait_ready
from tests.system.test_dashboard import (
    CSRF,
    VIEWPORT,
    add_key,
    browser,
    chromium_or_skip,
    cli,
    create_key,
    poisoned_and_fixed,
    sign_in,
    sign_in_page,
)
from tidings.api.app import create_app
from tidings.service import Service
from tidings.store.schema import delivery

DOCS = Path(__file__).parents[2] / "docs"


async def test_the_messages_page_searches_and_refuses_bad_fields(service: Service) -> None:
    app: FastAPI = create_app(service)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as api:
        kind = {"category": "transactional", "priority": "normal", "channels": ["email"]}
        await api.put("/v1/types/greeting", json=kind)
        await api.put("/v1/templates/greeting/email/en", json={"subject": "Hi", "text": "Hi"})
        ana = (await post(api, {"type": "greeting", "to": {"email": "ana@example.com"}})).json()
        await post(api, {"type": "greeting", "to": {"email": "bo@example.com"}})
    key = await add_key(app, "viewer", "read")
    async with browser(app) as client:
        await sign_in(client, key)
        found = await client.get("/dashboard/messages", params={"address": "ana@example.com"})
        assert found.status_code == 200
        assert f'data-notification="{ana["id"]}"' in found.text
        assert found.text.count("data-notification=") == 1
        assert "a***@example.com" in found.text
        every = await client.get("/dashboard/messages")
        assert every.text.count("data-notification=") == 2
        bad = await client.get("/dashboard/messages", params={"status": "LOST", "from": "x"})
        assert bad.status_code == 200 and 'role="alert"' in bad.text
        assert "data-notification=" not in bad.text
        naive = await client.get("/dashboard/messages", params={"from": "2026-12-01T00:00"})
        assert "give a time zone" in naive.text
        shown = await client.get(f"/dashboard/messages/{ana['id']}")
        assert 'data-kind="accepted"' in shown.text and "PENDING" in shown.text
        missing = await client.get("/dashboard/messages/01a230d8-86f3-75e2-8dfa-aade46dbfad9")
        assert "No notification" in missing.text


async def test_dead_letters_filtered_and_replayed_in_bulk(service: Service) -> None:
    app: FastAPI = create_app(service)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as api:
        await put_type(api, "greeting", channels=("email",))
        failed = [
            (await post(api, {"type": "greeting", "to": {"email": f"a{n}@example.com"}})).json()
            for n in range(3)
        ]
    async with service.db.engine.begin() as conn:  # failed for good, as a poisoned send ends
        ids = [uuid.UUID(n["deliveries"][0]["id"]) for n in failed]
        failure = {"status": "FAILED", "failure_kind": "poison", "last_error": "template"}
        await conn.execute(sa.update(delivery).where(delivery.c.id.in_(ids)).values(failure))
    admin = await add_key(app, "ops", "admin", "read")
    async with browser(app) as client:
        await sign_in(client, admin)
        page = await client.get("/dashboard/dead-letters", params={"type": "greeting"})
        assert "3 matching" in page.text and "Replay all 3" in page.text
        assert "setInterval" not in page.text  # a filtered page is not reloaded by itself
        none = await client.get("/dashboard/dead-letters", params={"type": "other"})
        assert "0 matching" in none.text and "data-delivery=" not in none.text
        bad = await client.get("/dashboard/dead-letters", params={"from": "2026-12-01T00:00"})
        assert "give a time zone" in bad.text
        confirm = await client.get("/dashboard/dead-letters/replay", params={"type": "greeting"})
        assert "Replay <b>3</b> dead letters" in confirm.text
        token = CSRF.search(confirm.text)
        assert token is not None
        form = {"csrf": token.group(1), "type": "greeting"}
        done = await client.post("/dashboard/dead-letters/replay", data=form)
        assert done.status_code == 303
        shown = await client.get(done.headers["location"])
        assert "Replayed 3 dead letters" in shown.text
        assert all(f'data-delivery="{d}"' not in shown.text for d in ids)
        forged = await client.post("/dashboard/dead-letters/replay", data={"type": "greeting"})
        assert forged.status_code == 403


async def search_and_replay(page: Page, base: str, admin: str, ids: dict[str, str]) -> None:
    await sign_in_page(page, base, admin)
    await page.click("text=Messages")
    await page.fill("input[name=address]", "ana0@example.com")
    await page.click("button:has-text('Search')")
    row = page.locator(f"tr[data-notification='{ids['notification']}']")
    await expect(row).to_be_visible()
    await expect(page.locator("#messages tbody tr")).to_have_count(1)
    await expect(row).to_contain_text("email: FAILED")
    await page.fill("input[name=address]", "")
    await page.select_option("select[name=status]", "SENT")
    await page.click("button:has-text('Search')")
    await expect(page.locator("#messages tbody tr[data-notification]")).to_have_count(5)
    await page.screenshot(path=ids["messages_png"], full_page=True)

    await page.goto(f"{base}/dashboard/messages/{ids['notification']}")
    delivery = page.locator(f"section[data-delivery='{ids['delivery']}']")
    await expect(delivery.locator("tr[data-kind='accepted']")).to_be_visible()
    await expect(delivery.locator("tr[data-kind='failed']")).to_be_visible()
    await page.screenshot(path=ids["message_png"], full_page=True)
    await delivery.get_by_role("button", name="Replay").click()
    await expect(page.get_by_role("status")).to_contain_text("was replayed")
    assert page.url.startswith(f"{base}/dashboard/messages/{ids['notification']}")
    await expect(delivery.locator("tr[data-kind='replayed']")).to_be_visible()


async def bulk_replay(page: Page, base: str, ids: dict[str, str]) -> None:
    """Filter the dead letters by error, ask to replay them all, confirm the count."""
    await page.goto(f"{base}/dashboard/dead-letters")
    await page.fill("input[name=error]", "UndefinedError")
    await page.click("button:has-text('Filter')")
    await expect(page.locator("#matching")).to_contain_text("2 matching")
    await page.screenshot(path=ids["dead_png"], full_page=True)
    await page.click("#bulk")
    await expect(page.locator("#confirm-count")).to_contain_text("Replay 2 dead letters")
    await page.get_by_role("button", name="Replay 2").click()
    await expect(page.get_by_role("status")).to_contain_text("Replayed 2 dead letters")
    await expect(page.locator("#matching")).to_contain_text("0 matching")


async def test_search_a_message_and_replay_it_in_a_real_browser(tmp_path: Path) -> None:
    executable = chromium_or_skip()
    port, env = free_port(), tidings_env()
    base = f"http://127.0.0.1:{port}"
    cli("migrate", cwd=tmp_path, env=env)
    setup = create_key("setup", "all", tmp_path, env)
    admin = create_key("ops", "admin,read", tmp_path, env)
    with tidings_processes(env, tmp_path) as processes:
        server = processes.start("serve", ["serve", "--port", str(port)])
        await wait_ready(base, server)
        headers = {"Authorization": f"Bearer {setup}"}
        async with httpx.AsyncClient(base_url=base, headers=headers) as api:
            (notification_id, delivery_id), *_ = await poisoned_and_fixed(api, 3)
        ids = {
            "notification": notification_id,
            "delivery": delivery_id,
            "messages_png": str(tmp_path / "console-messages.png"),
            "message_png": str(tmp_path / "console-message.png"),
            "dead_png": str(tmp_path / "console-dead-letters.png"),
        }
        async with async_playwright() as playwright:
            chromium = await playwright.chromium.launch(executable_path=executable)
            try:
                page = await chromium.new_page(viewport=VIEWPORT)
                await search_and_replay(page, base, admin, ids)
                await bulk_replay(page, base, ids)
            finally:
                await chromium.close()
        assert server.stop() == 0
    if os.environ.get("UPDATE_SCREENSHOT"):
        shutil.copy(ids["messages_png"], DOCS / "console-messages.png")
        shutil.copy(ids["message_png"], DOCS / "console-message.png")
        shutil.copy(ids["dead_png"], DOCS / "console-dead-letters.png")
