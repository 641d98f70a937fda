"""The bounce listener in a `tidings api` process (the rest of the SMTP bounce tests are in
tests/integration/test_smtp_bounces.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiosmtplib
import pytest

from tests.helpers import eventually
from tests.integration.test_smtp_bounces import DOMAIN
from tests.processes import free_port, tidings_env, tidings_processes
from tidings.settings import Settings


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
async def test_tidings_api_runs_the_listener_when_configured(
    settings: Settings, tmp_path: Path
) -> None:
    port = free_port()
    env = tidings_env(
        database_url=settings.database_url,
        secret_key="test-secret",
        bounces={"listen": f"127.0.0.1:{port}", "domain": DOMAIN},
    )
    with tidings_processes(env, tmp_path / "run") as processes:
        api = processes.start_api(free_port())
        client = aiosmtplib.SMTP(hostname="127.0.0.1", port=port, timeout=5)
        await eventually(lambda: _connects(client, api.is_running), within=30, interval=0.1)
        try:
            code, text = await client.mail("")
            assert code == 250
            code, text = await client.rcpt("someone@example.com")
        except aiosmtplib.SMTPRecipientRefused as error:
            code, text = error.code, error.message
        finally:
            client.close()
        assert api.stop() == 0
    assert code == 550 and "5.1.1" in text


async def _connects(client: aiosmtplib.SMTP, running: Any) -> bool:
    assert running(), "tidings api exited"
    try:
        await client.connect()
    except (OSError, aiosmtplib.SMTPConnectError):
        return False
    return True
