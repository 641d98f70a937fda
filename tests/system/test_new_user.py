"""What a new user met on a first try (issue 24): a CLI that answers at once, a hint that
names the variable the CLI reads, an unmigrated database said in one line, an open address
refused before any migration, and a campaign's watch that shows one progress."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.async_api import async_playwright, expect

from tests.conftest import pg_admin, pg_url, run_blocking
from tests.processes import free_port, run_cli, tidings_env, tidings_processes, wait_ready
from tests.system.test_dashboard import chromium_or_skip
from tidings.api.auth import Scope
from tidings.cli.common import error_text
from tidings.store.engine import connect
from tidings.store.migrate import current_revision, upgrade

# What a command's own work needs, and `--help` must not pay for.
HEAVY = ("fastapi", "sqlalchemy", "aiokafka", "aiohttp", "httpx", "pydantic", "alembic", "uvicorn")


def test_the_cli_loads_no_heavy_module_before_a_command_needs_it() -> None:
    probe = (
        "import sys, json\n"
        "from tidings.cli.app import main\n"
        "sys.argv = ['tidings', '--help']\n"
        "try:\n"
        "    main()\n"
        "except SystemExit:\n"
        "    pass\n"
        f"print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert "Usage" in done.stdout
    assert json.loads(done.stdout.splitlines()[-1]) == []


def test_the_keys_help_names_every_scope() -> None:
    from tidings.cli.keys import SCOPE_NAMES

    assert set(SCOPE_NAMES) == {scope.value for scope in Scope}


@pytest.mark.parametrize("key", [None, "tdk_wrong"])
def test_a_401_tells_the_cli_user_to_set_tidings_api_key(
    key: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    if key is None:
        monkeypatch.delenv("TIDINGS_API_KEY", raising=False)
    else:
        monkeypatch.setenv("TIDINGS_API_KEY", key)
    refused = {"error": {"code": "unauthorized", "message": "Authorization: Bearer <key>"}}
    text = error_text(httpx.Response(401, json=refused))
    assert "TIDINGS_API_KEY" in text and "Bearer" not in text, text


def revision_of(url: str) -> str | None:
    async def read() -> str | None:
        db = connect(url)
        try:
            return await current_revision(db)
        finally:
            await db.dispose()

    return asyncio.run(read())


def assert_told_to_migrate(done: subprocess.CompletedProcess[str], *said: str) -> None:
    """One line that names `tidings migrate`, exit 1, no traceback."""
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.strip().count("\n") == 0, done.stdout
    for words in ("run `tidings migrate`", *said):
        assert words in done.stdout, done.stdout
    assert "Traceback" not in done.stdout + done.stderr, done.stderr


@pytest.mark.parametrize("command", ["api", "dispatch"])
def test_a_process_on_a_database_never_migrated_says_to_migrate(
    command: str, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'new.db'}"
    done = run_cli(command, cwd=tmp_path, env=tidings_env(database_url=url))
    assert_told_to_migrate(done, "not migrated")


def test_a_process_on_an_older_schema_names_its_revision(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"

    async def migrate_to_first() -> None:
        db = connect(url)
        try:
            await upgrade(db, "0001")
        finally:
            await db.dispose()

    asyncio.run(migrate_to_first())
    done = run_cli(
        "api", "--port", str(free_port()), cwd=tmp_path, env=tidings_env(database_url=url)
    )
    assert_told_to_migrate(done, "revision 0001")


@pytest.fixture
def empty_pg_url() -> Iterator[str]:
    """A PostgreSQL database that exists, and was never migrated."""
    name = f"tidings_empty_{uuid.uuid4().hex[:12]}"
    run_blocking(pg_admin(f"CREATE DATABASE {name}"))
    yield pg_url(name)
    run_blocking(pg_admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))


@pytest.mark.parametrize("command", ["relay", "worker"])
def test_the_kafka_processes_say_to_migrate_too(
    command: str, empty_pg_url: str, tmp_path: Path
) -> None:
    # No broker listens there: the refusal comes before any Kafka connection.
    env = tidings_env(
        database_url=empty_pg_url, transport="kafka", kafka_bootstrap=f"127.0.0.1:{free_port()}"
    )
    assert_told_to_migrate(run_cli(command, cwd=tmp_path, env=env), "not migrated")


def test_serve_refuses_an_open_address_before_migrating(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'new.db'}"
    args = ("serve", "--host", "0.0.0.0", "--port", str(free_port()))
    done = run_cli(*args, cwd=tmp_path, env=tidings_env(database_url=url))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "refusing to serve 0.0.0.0" in done.stdout, done.stdout
    assert revision_of(url) is None  # refused first: nothing was migrated


async def test_docs_renders_the_openapi_31_definition_in_a_browser(tmp_path: Path) -> None:
    """/docs in Chromium: Swagger UI reads the OpenAPI 3.1 document and lists the routes,
    with every file from the service itself (it works without internet access)."""
    executable = chromium_or_skip()
    port, env = free_port(), tidings_env()
    base = f"http://127.0.0.1:{port}"
    elsewhere: list[str] = []
    with tidings_processes(env, tmp_path) as processes:
        await wait_ready(base, processes.start("serve", ["serve", "--port", str(port)]))
        async with async_playwright() as playwright:
            chromium = await playwright.chromium.launch(executable_path=executable)
            try:
                page = await chromium.new_page()
                page.on(
                    "request",
                    lambda request: (
                        None
                        if request.url.startswith((base, "data:"))
                        else elsewhere.append(request.url)
                    ),
                )
                await page.goto(f"{base}/docs")
                send = page.locator(
                    ".opblock-post .opblock-summary-path[data-path='/v1/notifications']"
                )
                await expect(send).to_be_visible(timeout=30_000)
                assert await page.get_by_text("Unable to render").count() == 0
            finally:
                await chromium.close()
    assert elsewhere == []
