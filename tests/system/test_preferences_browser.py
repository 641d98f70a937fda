"""The preference center in a real browser (Debian's chromium, driven by Playwright): the
user switches marketing email off on the page, and the next marketing email is SKIPPED.
UPDATE_SCREENSHOT=1 saves docs/preferences.png."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import httpx
import pytest
from playwright.async_api import expect

from tests.helpers import eventually, post, put_type, running_dispatcher
from tests.integration.test_inbox_channel import register, statuses
from tests.processes import free_port
from tests.system.test_dashboard import chromium_or_skip
from tests.system.test_inbox_browser import serving
from tidings.api.app import create_app
from tidings.providers.testing import ScriptedProvider
from tidings.service import Service

SCREENSHOT = Path(__file__).parents[2] / "docs" / "preferences.png"


async def _types(client: httpx.AsyncClient) -> None:
    await put_type(client, "receipt", channels=("email", "push"))
    await put_type(client, "renewal", category="reminder", channels=("email", "sms", "push"))
    await put_type(
        client, "promo", category="marketing", priority="low", channels=("email", "push")
    )


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
async def test_the_page_switches_marketing_email_off_and_the_next_one_is_skipped(
    service: Service, tmp_path: Path
) -> None:
    executable = chromium_or_skip()
    from playwright.async_api import async_playwright

    port = free_port()
    api = f"http://127.0.0.1:{port}"
    async with (
        serving(create_app(service), port),
        httpx.AsyncClient(base_url=api, timeout=10) as client,
        async_playwright() as playwright,
    ):
        await _types(client)
        await register(client, "ana", email="ana@example.com", timezone="America/Sao_Paulo")
        chromium = await playwright.chromium.launch(executable_path=executable)
        try:
            page = await chromium.new_page(viewport={"width": 860, "height": 900})
            page.set_default_timeout(15_000)
            await page.goto(f"{api}/p/{service.preference_links.token('ana')}")
            switch = page.get_by_role("checkbox", name="News and offers by Email")
            await expect(switch).to_be_checked()
            locked = page.get_by_role("checkbox", name="Account and orders by Email")
            await expect(locked).to_be_disabled()
            await switch.uncheck()
            await page.get_by_label("From").fill("22:00")
            await page.get_by_label("To", exact=True).fill("07:00")
            await page.get_by_role("button", name="Save preferences").click()
            await expect(page.get_by_role("status")).to_have_text("Your preferences are saved.")
            await expect(
                page.get_by_role("checkbox", name="News and offers by Email")
            ).not_to_be_checked()
            await page.screenshot(path=str(tmp_path / "preferences.png"), full_page=True)
        finally:
            await chromium.close()
        shown = (await client.get("/v1/users/ana/preferences")).json()
        assert shown["categories"]["marketing"]["email"] is False
        assert shown["quietHours"] == {"from": "22:00", "to": "07:00"}
        body = {"type": "promo", "userId": "ana", "channels": ["email"]}
        sent = await post(client, body)
        assert sent.status_code == 202, sent.text
        async with running_dispatcher(service, ScriptedProvider()):
            found = await eventually(lambda: statuses(client, sent.json()["id"]))
        assert found == {"email": "SKIPPED"}
        notification = (await client.get(f"/v1/notifications/{sent.json()['id']}")).json()
        assert notification["deliveries"][0]["skipReason"] == "preference_off"
    if os.environ.get("UPDATE_SCREENSHOT"):
        shutil.copy(tmp_path / "preferences.png", SCREENSHOT)
