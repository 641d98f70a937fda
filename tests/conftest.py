"""Fixtures: the same store tests on SQLite and PostgreSQL, each test on a fresh database.

PostgreSQL: one template database is migrated per session, and every test gets
``CREATE DATABASE ... TEMPLATE`` of it (fast, and isolated). It is on day partitions, as
`tidings migrate` leaves a new database; tests of plain tables on PostgreSQL (their
retention, the conversion onto partitions) take ``pg_plain_database_url``, from a second
template kept plain. SQLite: a migrated file is copied per test.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import shutil
import uuid
from collections.abc import AsyncIterator, Coroutine, Iterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
import sqlalchemy as sa

from tidings.api.app import create_app
from tidings.service import Service
from tidings.settings import Settings
from tidings.store.engine import Database, connect
from tidings.store.migrate import upgrade

POSTGRES_FIXTURES = {"pg_database_url", "pg_plain_database_url", "pg_template", "pg_plain_template"}

PG_ADMIN_URL = os.environ.get("TIDINGS_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--sqlite-only",
        action="store_true",
        help="deselect every test on PostgreSQL (make test-fast)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """With --sqlite-only, the tests that would run on PostgreSQL are deselected, not skipped:
    those parametrized onto it and those that take a PostgreSQL database themselves."""
    if not config.getoption("--sqlite-only"):
        return
    kept, dropped = [], []
    for item in items:
        on_postgres = POSTGRES_FIXTURES & set(getattr(item, "fixturenames", ()))
        callspec = getattr(item, "callspec", None)
        if callspec is not None and callspec.params.get("backend") == "postgresql":
            on_postgres = {"backend"}
        (dropped if on_postgres else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def pg_url(database: str) -> str:
    return sa.make_url(PG_ADMIN_URL).set(database=database).render_as_string(False)


async def pg_admin(*statements: str) -> None:
    conn = await asyncpg.connect(PG_ADMIN_URL)
    try:
        for statement in statements:
            await conn.execute(statement)
    finally:
        await conn.close()


def run_blocking(coroutine: Coroutine[Any, Any, None]) -> None:
    """Run ``coroutine`` to completion on a loop of its own, even from inside a running loop
    (session fixtures may be set up lazily by an async test)."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(asyncio.run, coroutine).result()


async def _migrate(url: str, day_partitions: bool = True) -> None:
    db = connect(url)
    try:
        await upgrade(db, day_partitions=day_partitions)
    finally:
        await db.dispose()


def _pg_template(name: str, day_partitions: bool) -> Iterator[str]:
    run_blocking(pg_admin(f"DROP DATABASE IF EXISTS {name}", f"CREATE DATABASE {name}"))
    run_blocking(_migrate(pg_url(name), day_partitions))
    yield name
    run_blocking(pg_admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))


@pytest.fixture(scope="session")
def pg_template() -> Iterator[str]:
    """Migrated as `tidings migrate` leaves a new database: on day partitions."""
    yield from _pg_template(f"tidings_tmpl_{os.getpid()}", day_partitions=True)


@pytest.fixture(scope="session")
def pg_plain_template() -> Iterator[str]:
    """Migrated to head on plain tables (as migration 0026 leaves a large database)."""
    yield from _pg_template(f"tidings_plain_{os.getpid()}", day_partitions=False)


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sqlite-template") / "template.db"
    run_blocking(_migrate(f"sqlite:///{path}"))
    return path


def _pg_database(template: str) -> Iterator[str]:
    name = f"tidings_test_{uuid.uuid4().hex[:12]}"
    run_blocking(pg_admin(f"CREATE DATABASE {name} TEMPLATE {template}"))
    yield pg_url(name)
    run_blocking(pg_admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))


@pytest.fixture
def pg_database_url(pg_template: str) -> Iterator[str]:
    """A fresh migrated PostgreSQL database for one test, on day partitions (today and the
    7 days ahead made when the session's template was)."""
    yield from _pg_database(pg_template)


@pytest.fixture
def pg_plain_database_url(pg_plain_template: str) -> Iterator[str]:
    """A fresh PostgreSQL database at head on plain tables, for one test."""
    yield from _pg_database(pg_plain_template)


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest) -> str:
    backend: str = request.param
    return backend


@pytest.fixture
def sqlite_copy(tmp_path: Path, sqlite_template: Path) -> Path:
    """A migrated SQLite file of this test's own."""
    path = tmp_path / "tidings.db"
    shutil.copy(sqlite_template, path)
    return path


@pytest.fixture
def database_url(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path, sqlite_template: Path
) -> str:
    if backend == "sqlite":
        path = tmp_path / "tidings.db"
        shutil.copy(sqlite_template, path)
        return f"sqlite:///{path}"
    url: str = request.getfixturevalue("pg_database_url")
    return url


@pytest.fixture
def settings(database_url: str, tmp_path: Path) -> Settings:
    return Settings(
        database_url=database_url,
        outbox_dir=tmp_path / "outbox",
        secret_key="test-secret",
        reaper_interval=0.2,
        outcome_flush_interval=0.005,
        # Due at once means due at once here; tests of the spread set it themselves.
        campaigns={"due_spread_seconds": 0, "poll_interval": 0.1, "lease_seconds": 5},
        lanes={
            "high": {"concurrency": 8, "poll_interval": 0.1},
            "normal": {"concurrency": 8, "poll_interval": 0.1},
            "low": {"concurrency": 8, "poll_interval": 0.1},
        },
    )


@pytest.fixture
async def service(settings: Settings) -> AsyncIterator[Service]:
    service = Service.from_settings(settings)
    yield service
    await service.close()


@pytest.fixture
def db(service: Service) -> Database:
    return service.db


@pytest.fixture
async def client(service: Service) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_app(service))
    async with httpx.AsyncClient(transport=transport, base_url="http://tidings") as client:
        yield client
