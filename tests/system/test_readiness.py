"""Start-up and readiness: a process started before PostgreSQL accepts connections waits for
it (one log line per try) and then serves; ``/readyz`` is 503 while the database refuses
writes, though it still answers reads."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from tests.conftest import pg_admin
from tests.processes import free_port, tidings_env, tidings_processes, wait_ready
from tests.tcp_proxy import TcpProxy
from tidings.api.app import create_app
from tidings.service import Service
from tidings.settings import Settings


async def _readyz(settings: Settings) -> httpx.Response:
    """``GET /readyz`` of a fresh API (its own pool and its own probe's cache)."""
    service = Service.from_settings(settings)
    try:
        transport = httpx.ASGITransport(app=create_app(service))
        async with httpx.AsyncClient(transport=transport, base_url="http://tidings") as client:
            return await client.get("/readyz")
    finally:
        await service.close()


@pytest.fixture
async def read_only(backend: str, settings: Settings) -> AsyncIterator[Settings]:
    """The test's database, opened so that every write fails and reads still work:
    PostgreSQL with ``default_transaction_read_only``, SQLite opened read-only (as on a
    read-only filesystem: "attempt to write a readonly database")."""
    url = sa.make_url(settings.database_url)
    if backend == "sqlite":
        ro = f"sqlite:///file:{url.database}?mode=ro&uri=true"
        yield settings.model_copy(update={"database_url": ro})
        return
    name = url.database
    await pg_admin(f"ALTER DATABASE {name} SET default_transaction_read_only = on")
    try:
        yield settings
    finally:
        await pg_admin(f"ALTER DATABASE {name} SET default_transaction_read_only = off")


async def test_readyz_is_503_while_writes_fail(read_only: Settings) -> None:
    refused = await _readyz(read_only)
    assert refused.status_code == 503, refused.text
    error = refused.json()["error"]
    assert error["code"] == "database_refuses_writes"
    assert "refuses writes" in error["message"]


async def test_readyz_is_200_when_writes_work_and_leaves_nothing(
    client: httpx.AsyncClient, service: Service
) -> None:
    from tidings.store.schema import idempotency_key

    for _ in range(3):
        ready = await client.get("/readyz")
        assert ready.status_code == 200, ready.text
    async with service.db.engine.connect() as conn:
        left = await conn.execute(sa.select(sa.func.count()).select_from(idempotency_key))
        assert left.scalar_one() == 0


async def test_api_started_before_postgresql_waits_and_serves(
    pg_database_url: str, tmp_path: Path
) -> None:
    """The API's database is a port nothing listens on yet; a forwarder to PostgreSQL opens
    there a few tries later, and the API comes up without being restarted."""
    proxy = TcpProxy(target_port=sa.make_url(pg_database_url).port or 5432)
    url = sa.make_url(pg_database_url).set(host="127.0.0.1", port=proxy.port)
    env = tidings_env(database_url=url.render_as_string(False), secret_key="readiness-test")
    port = free_port()
    with tidings_processes(env, tmp_path) as processes:
        api = processes.start_api(port)
        try:
            expected = f"database not reachable at 127.0.0.1:{proxy.port}"
            deadline = time.monotonic() + 60
            while api.log().count(expected) < 2:  # it tried, and tried again
                assert api.is_running(), f"the API exited:\n{api.log_tail()}"
                assert time.monotonic() < deadline, api.log_tail()
                await asyncio.sleep(0.1)
            proxy.start()  # PostgreSQL "comes up"
            await wait_ready(f"http://127.0.0.1:{port}", api, timeout=60)
            assert "retrying in" in api.log()
        finally:
            proxy.close()
