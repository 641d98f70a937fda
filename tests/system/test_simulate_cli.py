"""``tidings simulate`` as a new user meets it: help, then a demo against real processes."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from tests.helpers import eventually
from tests.processes import (
    TidingsProcess,
    free_port,
    tidings_env,
    tidings_processes,
    wait_ready,
)
from tidings.cli.app import app
from tidings.settings import Settings


def test_simulate_has_help() -> None:
    result = CliRunner().invoke(app, ["simulate", "--help"])
    assert result.exit_code == 0, result.output
    for option in ("--config", "--http-port", "--smtp-port", "--credentials-dir", "--write-config"):
        assert option in result.output


def test_top_level_help_lists_simulate() -> None:
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0
    assert "simulate" in result.output


async def wait_simulator(url: str, config: Path, process: TidingsProcess) -> None:
    """Until the tidings configuration is written and the control API answers."""

    def written() -> bool:
        if not process.is_running():
            raise RuntimeError(f"simulate exited early:\n{process.log_tail()}")
        return config.exists()

    await eventually(written, within=30.0, interval=0.05)
    async with httpx.AsyncClient(timeout=2.0) as client:
        assert (await client.get(f"{url}/_sim/counts")).status_code == 200


async def register(client: httpx.AsyncClient) -> None:
    kind = {"category": "transactional", "priority": "high", "channels": ["email", "sms"]}
    assert (await client.put("/v1/types/login.code", json=kind)).status_code == 201
    templates = {
        "email": {"subject": "Your code", "text": "Your code is {{ code }}."},
        "sms": {"text": "Your tidings code: {{ code }}"},
    }
    for channel, parts in templates.items():
        response = await client.put(f"/v1/templates/login.code/{channel}/en", json=parts)
        assert response.status_code == 201, response.text


@pytest.mark.slow
async def test_a_new_user_sends_through_the_simulator(tmp_path: Path) -> None:
    """simulate --write-config, serve with that file, send email+SMS, see both arrive."""
    http_port, smtp_port, api_port = free_port(), free_port(), free_port()
    sim_url, base = f"http://127.0.0.1:{http_port}", f"http://127.0.0.1:{api_port}"
    config = tmp_path / "tidings.toml"
    with tidings_processes(tidings_env(), tmp_path) as processes:
        simulator = processes.start(
            "simulate",
            [
                "simulate",
                *("--http-port", str(http_port), "--smtp-port", str(smtp_port)),
                *("--credentials-dir", str(tmp_path / "creds"), "--write-config", str(config)),
            ],
        )
        await wait_simulator(sim_url, config, simulator)
        loaded = Settings.load(config)
        assert loaded.chain("email") == ["sendgrid-sim", "smtp-sim"]
        assert set(loaded.accounts) >= {"smtp-sim", "twilio-sim", "fcm-sim", "apns-sim"}

        server = processes.start(
            "serve", ["serve", "--config", str(config), "--port", str(api_port)]
        )
        await wait_ready(base, server)
        async with httpx.AsyncClient(base_url=base) as client:
            await register(client)
            response = await client.post(
                "/v1/notifications",
                headers={"Idempotency-Key": "login-1"},
                json={
                    "type": "login.code",
                    "to": {"email": "ana@example.com", "phone": "+14155550123"},
                    "data": {"code": "123456"},
                },
            )
            assert response.status_code == 202, response.text
            shown = await _until_sent(client, f"/v1/notifications/{response.json()['id']}")

        by_channel = {d["channel"]: d for d in shown["deliveries"]}
        assert by_channel["email"]["provider"] == "sendgrid-sim"
        assert by_channel["sms"]["provider"] == "twilio-sim"
        assert all(d["providerMessageId"] for d in by_channel.values()), by_channel
        async with httpx.AsyncClient(base_url=sim_url) as sim:
            counts = (await sim.get("/_sim/counts")).json()
            assert counts["sendgrid"]["received"] == 1
            assert counts["twilio"]["received"] == 1
            assert counts["smtp"]["received"] == 0
            sms = (await sim.get("/_sim/twilio/messages")).json()
            assert sms[0]["payload"]["Body"] == "Your tidings code: 123456"

        assert await server.stop_and_wait() == 0, server.log_tail()
        assert await simulator.stop_and_wait() == 0, simulator.log_tail()
        assert "simulator stopped" in simulator.log()


async def _until_sent(client: httpx.AsyncClient, url: str) -> dict[str, Any]:
    """The notification once no delivery is pending any more."""
    shown: dict[str, Any] = {}
    for _ in range(400):
        shown = (await client.get(url)).json()
        if all(d["status"] not in ("PENDING", "QUEUED", "SENDING") for d in shown["deliveries"]):
            break
        await asyncio.sleep(0.025)
    assert [d["status"] for d in shown["deliveries"]] == ["SENT", "SENT"], shown
    return shown
