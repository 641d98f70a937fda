"""The dashboard (docs/operations.md, Dashboard): its sign-in, forms, scopes and numbers
in-process, and a replay in a real browser (Debian's chromium, driven by Playwright)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa
from fastapi import FastAPI
from playwright.async_api import Page, async_playwright, expect

from tests.helpers import email_to, eventually, post, put_type, running_dispatcher
from tests.processes import free_port, tidings_env, tidings_processes, wait_ready
from tidings.api.app import create_app
from tidings.api.auth import Keyring, issue_key
from tidings.api.dashboard.sessions import COOKIE
from tidings.clock import utcnow
from tidings.providers.testing import Script, ScriptedProvider
from tidings.service import Service
from tidings.store import api_keys, deadletters
from tidings.store.dashboard import BUCKETS, last_hour
from tidings.store.engine import Database
from tidings.store.schema import delivery

CSRF = re.compile(r'name="csrf" value="([^"]+)"')
CHROMIUM = "/usr/bin/chromium"  # scripts/browser.sh installs it
# Set by scripts/test.sh (the project's test command, CI's too), which installs chromium
# first: there a missing browser is a failure, never a skip that passes unseen.
REQUIRE_BROWSER = "TIDINGS_REQUIRE_BROWSER"
SCREENSHOT = Path(__file__).parents[2] / "docs" / "dashboard.png"
VIEWPORT = {"width": 1280, "height": 900}  # the saved screenshot's size


@pytest.fixture
def app(service: Service) -> FastAPI:
    return create_app(service)


def browser(app: FastAPI) -> httpx.AsyncClient:
    """A client that keeps cookies as a browser does; https, since the cookie is Secure."""
    transport = httpx.ASGITransport(app=app)
    return httpx.AsyncClient(transport=transport, base_url="https://tidings")


async def add_key(app: FastAPI, name: str, *scopes: str) -> str:
    key, stored = issue_key(name, scopes, "default")
    await api_keys.insert(app.state.service.db, stored)
    keyring: Keyring = app.state.keyring
    keyring.forget()
    return key


async def csrf_of(client: httpx.AsyncClient, path: str) -> str:
    found = CSRF.search((await client.get(path)).text)
    assert found is not None, f"no form token on {path}"
    return found.group(1)


async def sign_in(client: httpx.AsyncClient, key: str) -> httpx.Response:
    token = await csrf_of(client, "/dashboard/login")
    return await client.post("/dashboard/login", data={"key": key, "csrf": token})


async def failed_delivery(app: FastAPI, address: str = "ana@example.com") -> str:
    """An email delivery that failed its one attempt (exhausted); its id. Before any key."""
    service: Service = app.state.service
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://tidings"
    ) as client:
        await put_type(client, channels=("email",), retry={"maxAttempts": 1})
        accepted = (await post(client, email_to(address))).json()
    provider = ScriptedProvider(scripts={address: Script(transient_failures=99)})
    async with running_dispatcher(service, provider):
        await eventually(lambda: deadletters.list_dead(service.db, "default"))
    return str(accepted["deliveries"][0]["id"])


async def status_of(db: Database, delivery_id: str) -> str:
    query = sa.select(delivery.c.status).where(delivery.c.id == uuid.UUID(delivery_id))
    async with db.engine.connect() as conn:
        return str((await conn.execute(query)).scalar_one())


async def test_a_key_signs_in_with_a_secure_session_cookie(app: FastAPI) -> None:
    admin = await add_key(app, "ops", "admin", "read")
    sender = await add_key(app, "orders", "send")
    async with browser(app) as client:
        away = await client.get("/dashboard")
        assert (away.status_code, away.headers["location"]) == (303, "/dashboard/login")
        wrong = await sign_in(client, "tdk_" + "x" * 43)
        assert wrong.status_code == 401 and "not a valid API key" in wrong.text
        assert (await sign_in(client, sender)).status_code == 403  # neither read nor admin
        assert (await client.get("/dashboard")).status_code == 303

        signed = await sign_in(client, admin)
        assert (signed.status_code, signed.headers["location"]) == (303, "/dashboard")
        cookie = signed.headers["set-cookie"]
        for attribute in ("HttpOnly", "Secure", "SameSite=strict", "Path=/dashboard"):
            assert attribute.lower() in cookie.lower(), cookie
        assert "Max-Age=28800" in cookie and admin not in cookie
        shown = await client.get("/dashboard")
        assert shown.status_code == 200 and "ops" in shown.text and 'id="lanes"' in shown.text
        assert "frame-ancestors 'none'" in shown.headers["content-security-policy"]

        token = CSRF.search(shown.text)
        assert token is not None
        out = await client.post("/dashboard/logout", data={"csrf": token.group(1)})
        assert (out.status_code, out.headers["location"]) == (303, "/dashboard/login")
        assert client.cookies.get(COOKIE) is None
        assert (await client.get("/dashboard")).status_code == 303


async def test_every_form_needs_the_sessions_token_from_this_origin(app: FastAPI) -> None:
    delivery_id = await failed_delivery(app)
    admin = await add_key(app, "ops", "admin", "read")
    replay = f"/dashboard/dead-letters/{delivery_id}/replay"
    async with browser(app) as client, browser(app) as other:
        await sign_in(client, admin)
        await sign_in(other, admin)
        token = await csrf_of(client, "/dashboard/dead-letters")
        theirs = await csrf_of(other, "/dashboard/dead-letters")
        refused = [
            await client.post(replay),
            await client.post(replay, data={"csrf": "0" * 64}),
            await client.post(replay, data={"csrf": theirs}),  # another session's token
            await client.post(replay, data={"csrf": token}, headers={"Origin": "https://evil"}),
            await client.post("/dashboard/logout"),
        ]
        assert [r.status_code for r in refused] == [403] * 5
        assert await status_of(app.state.service.db, delivery_id) == "FAILED"

        origin = {"Origin": "https://tidings"}  # this site, as a browser says it
        done = await client.post(replay, data={"csrf": token, "back": "overview"}, headers=origin)
        assert done.status_code == 303
        assert done.headers["location"].startswith("/dashboard?replayed=")
        assert await status_of(app.state.service.db, delivery_id) == "PENDING"
        assert "was replayed" in (await client.get(done.headers["location"])).text


async def test_a_read_key_sees_the_dead_letters_but_cannot_replay(app: FastAPI) -> None:
    delivery_id = await failed_delivery(app)
    viewer = await add_key(app, "viewer", "read")
    async with browser(app) as client:
        assert (await sign_in(client, viewer)).status_code == 303
        page = await client.get("/dashboard/dead-letters")
        assert delivery_id in page.text and "a***@example.com" in page.text
        assert "ana@example.com" not in page.text and "Replay</button>" not in page.text
        token = CSRF.search(page.text)
        assert token is not None
        forged = await client.post(
            f"/dashboard/dead-letters/{delivery_id}/replay", data={"csrf": token.group(1)}
        )
        assert forged.status_code == 403 and "admin scope" in forged.text
    assert await status_of(app.state.service.db, delivery_id) == "FAILED"


async def test_a_revoked_keys_session_stops_working(app: FastAPI) -> None:
    admin = await add_key(app, "ops", "admin")
    async with browser(app) as client:
        await sign_in(client, admin)
        assert (await client.get("/dashboard")).status_code == 200
        await api_keys.revoke(app.state.service.db, ["ops"], utcnow())
        keyring: Keyring = app.state.keyring
        keyring.forget()  # as every process does within api_key_refresh_seconds
        away = await client.get("/dashboard")
        assert (away.status_code, away.headers["location"]) == (303, "/dashboard/login")
        assert (await sign_in(client, admin)).status_code == 401


async def test_an_open_service_has_an_open_dashboard_with_protected_forms(app: FastAPI) -> None:
    delivery_id = await failed_delivery(app)
    async with browser(app) as client:
        assert (await client.get("/dashboard/login")).headers["location"] == "/dashboard"
        shown = await client.get("/dashboard")
        assert shown.status_code == 200 and "open service" in shown.text
        assert "Replay</button>" in shown.text
        replay = f"/dashboard/dead-letters/{delivery_id}/replay"
        assert (await client.post(replay)).status_code == 403
        token = await csrf_of(client, "/dashboard")
        assert (await client.post(replay, data={"csrf": token})).status_code == 303
    assert await status_of(app.state.service.db, delivery_id) == "PENDING"


async def test_the_overview_counts_the_last_hours_sends_and_failures(app: FastAPI) -> None:
    service: Service = app.state.service
    await failed_delivery(app)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://tidings"
    ) as client:
        ids = [(await post(client, email_to(f"u{n}@example.com"))).json()["id"] for n in range(3)]
    async with running_dispatcher(service, ScriptedProvider()):
        await eventually(lambda: _sent(service.db, 3))
    now = utcnow()
    earlier = now - timedelta(minutes=27, seconds=30)  # in the 7th of 12 five-minute buckets
    async with service.db.engine.begin() as conn:
        moved = delivery.c.notification_id == uuid.UUID(ids[0])
        await conn.execute(sa.update(delivery).where(moved).values(sent_at=earlier))
    hour = await last_hour(service.db, now)
    normal = hour.sent_by_lane["normal"]
    assert len(normal) == BUCKETS and normal[6] == 1 and normal[-1] == 2 and sum(normal) == 3
    [route] = hour.routes
    assert (route.channel, route.sent, route.failed) == ("email", 3, 1)
    assert route.failure_rate == 0.25
    async with browser(app) as client:
        page = (await client.get("/dashboard")).text
    assert "25.0 %" in page and "exhausted" in page


async def _sent(db: Database, count: int) -> bool:
    query = sa.select(sa.func.count()).where(delivery.c.status == "SENT")
    async with db.engine.connect() as conn:
        return int((await conn.execute(query)).scalar_one()) >= count


# --- in a real browser -------------------------------------------------------------------


def cli(*args: str, cwd: Path, env: dict[str, str]) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "tidings", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def create_key(name: str, scopes: str, cwd: Path, env: dict[str, str]) -> str:
    shown = cli("keys", "create", "--name", name, "--scopes", scopes, "--json", cwd=cwd, env=env)
    key: str = json.loads(shown)["key"]
    return key


async def poisoned_and_fixed(api: httpx.AsyncClient, count: int) -> list[tuple[str, str]]:
    """``count`` deliveries failed as poison (the template needs a ``name`` they lack),
    then the template fixed, so that a replay sends, and a few sends for the lanes; the
    failed ones' notification and delivery ids."""
    kind = {"category": "transactional", "priority": "high", "channels": ["email"]}
    assert (await api.put("/v1/types/greeting", json=kind)).status_code in (200, 201)
    broken = {"subject": "Hi", "text": "Hello {{ name }}"}
    await api.put("/v1/templates/greeting/email/en", json=broken)
    failed = []
    for n in range(count):
        body = {"type": "greeting", "to": {"email": f"ana{n}@example.com"}, "data": {}}
        accepted = (await post(api, body)).json()
        failed.append((accepted["id"], accepted["deliveries"][0]["id"]))

    async def dead() -> bool:
        listed = (await api.get("/v1/dead-letters")).json()
        return {d["id"] for d in listed} == {d for _, d in failed}

    await eventually(dead, within=15)
    await api.put("/v1/templates/greeting/email/en", json={"subject": "Hi", "text": "Hello"})
    sent = []
    for n in range(5):
        sent.append(
            (await post(api, {"type": "greeting", "to": {"email": f"bob{n}@x.org"}})).json()
        )
    for accepted in sent:
        await eventually(lambda a=accepted: _status(api, a["id"], "SENT"), within=15)
    return failed


async def a_campaign(api: httpx.AsyncClient, users: int) -> str:
    """A campaign of the greeting to ``users`` users, spread over the next ten minutes."""
    for n in range(users):
        await api.put(f"/v1/users/u{n}", json={"email": f"u{n}@example.com"})
    body = {
        "type": "greeting",
        "name": "welcome",
        "audience": {"userIds": [f"u{n}" for n in range(users)]},
        "spreadOver": "10m",
    }
    created = await api.post("/v1/campaigns", json=body, headers={"Idempotency-Key": "c-1"})
    assert created.status_code == 202, created.text
    campaign_id: str = created.json()["campaignId"]
    return campaign_id


async def _status(api: httpx.AsyncClient, notification_id: str, status: str) -> bool:
    shown = (await api.get(f"/v1/notifications/{notification_id}")).json()
    return bool(shown["deliveries"][0]["status"] == status)


async def sign_in_page(page: Page, base: str, key: str) -> None:
    await page.goto(f"{base}/dashboard/login")
    await page.fill("#key", key)
    await page.click("button[type=submit]")


async def admin_replays(page: Page, base: str, admin: str, ids: dict[str, str]) -> None:
    """Sign in (a wrong key first), see the overview, save it, and replay one dead letter."""
    await sign_in_page(page, base, "tdk_not-a-key")
    await expect(page.get_by_role("alert")).to_contain_text("not a valid")
    await sign_in_page(page, base, admin)
    await expect(page.locator(f"tr[data-delivery='{ids['replayed']}']")).to_be_visible()
    await expect(page.locator("tr[data-lane='high'] td").nth(5)).not_to_have_text("0")
    campaign = page.locator("#campaigns tr", has_text=ids["campaign"])
    await expect(campaign).to_contain_text("welcome")
    await page.screenshot(path=ids["screenshot"])
    if os.environ.get("UPDATE_SCREENSHOT"):
        shutil.copy(ids["screenshot"], SCREENSHOT)

    replay = f"{base}/dashboard/dead-letters/{ids['kept']}/replay"
    assert (await page.request.post(replay, form={"back": "overview"})).status == 403
    row = page.locator(f"tr[data-delivery='{ids['replayed']}']")
    await row.get_by_role("button", name="Replay").click()
    await expect(page.get_by_role("status")).to_contain_text("was replayed")
    await expect(page.locator(f"tr[data-delivery='{ids['replayed']}']")).to_have_count(0)
    await expect(page.locator(f"tr[data-delivery='{ids['kept']}']")).to_be_visible()
    await page.get_by_role("button", name="Sign out").click()
    await expect(page.locator("#key")).to_be_visible()


async def reader_cannot_replay(page: Page, base: str, viewer: str, kept: str) -> None:
    await sign_in_page(page, base, viewer)
    await page.goto(f"{base}/dashboard/dead-letters")
    await expect(page.locator(f"tr[data-delivery='{kept}']")).to_be_visible()
    await expect(page.get_by_role("button", name="Replay")).to_have_count(0)
    token = await page.locator("input[name=csrf]").first.get_attribute("value")
    replay = f"{base}/dashboard/dead-letters/{kept}/replay"
    assert (await page.request.post(replay, form={"csrf": token or ""})).status == 403


def chromium_or_skip() -> str:
    """The browser's path; without it the test is skipped, or fails where it is required."""
    if os.access(CHROMIUM, os.X_OK):
        return CHROMIUM
    if os.environ.get(REQUIRE_BROWSER) == "1":
        pytest.fail(f"{CHROMIUM} is missing and {REQUIRE_BROWSER}=1: run scripts/browser.sh")
    pytest.skip(f"{CHROMIUM} is missing: run scripts/browser.sh")


async def test_an_admin_replays_a_dead_letter_in_a_real_browser(tmp_path: Path) -> None:
    executable = chromium_or_skip()
    port, env = free_port(), tidings_env()
    base = f"http://127.0.0.1:{port}"
    cli("migrate", cwd=tmp_path, env=env)
    setup = create_key("setup", "all", tmp_path, env)
    admin = create_key("ops", "admin,read", tmp_path, env)
    viewer = create_key("viewer", "read", tmp_path, env)
    with tidings_processes(env, tmp_path) as processes:
        server = processes.start("serve", ["serve", "--port", str(port)])
        await wait_ready(base, server)
        headers = {"Authorization": f"Bearer {setup}"}
        async with httpx.AsyncClient(base_url=base, headers=headers) as api:
            (notification_id, replayed), (_, kept) = await poisoned_and_fixed(api, 2)
            ids = {
                "replayed": replayed,
                "kept": kept,
                "campaign": await a_campaign(api, 20),
                "screenshot": str(tmp_path / "dashboard.png"),
            }
            async with async_playwright() as playwright:
                chromium = await playwright.chromium.launch(executable_path=executable)
                try:
                    page = await chromium.new_page(viewport=VIEWPORT)
                    await admin_replays(page, base, admin, ids)
                    await reader_cannot_replay(await chromium.new_page(), base, viewer, kept)
                finally:
                    await chromium.close()

            await eventually(lambda: _status(api, notification_id, "SENT"), within=10)
            shown = (await api.get(f"/v1/notifications/{notification_id}")).json()
            assert "replayed" in [e["kind"] for e in shown["deliveries"][0]["history"]]
        assert server.stop() == 0
